"""Pure history transforms: messages in, (new messages, report) out."""
