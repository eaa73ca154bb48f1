//! The `llm` runtime: OpenAI-compatible chat completions with tool calling.
