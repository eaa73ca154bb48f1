//! Test support: a local server that speaks the OpenAI chat-completions protocol with
//! scripted replies, for the tests and benchmarks of the `llm` runtime.
