//! Server-sent events: the streamed exchange with an endpoint, and the framing that builds
//! the answer's text and tool calls from the `data:` lines as they arrive.

use reqwest::header::CONTENT_TYPE;

use crate::answer::Answer;
use crate::endpoint::{BODY_CAP, Endpoint};
use crate::error::LlmError;
use crate::protocol::{AssistantMessage, FunctionCall, StreamChunk, ToolCall, Usage};

impl Endpoint {
    /// One streamed exchange: the events of a `text/event-stream` answer, or a whole
    /// completion when the server did not stream. Every wait (for the headers, for the next
    /// event) is bounded by the idle timeout; a stream that ends before its last event is the
    /// server's failure.
    pub(crate) async fn exchange_streaming(
        &self,
        body: &[u8],
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Answer, LlmError> {
        let idle = || LlmError::Idle { provider: self.name.clone(), after: self.idle_timeout };
        let mut response = tokio::time::timeout(self.idle_timeout, self.post(body)).await.map_err(|_| idle())??;
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if !response.status().is_success() || !is_stream {
            let bytes =
                tokio::time::timeout(self.idle_timeout, self.read_body(response)).await.map_err(|_| idle())??;
            let parsed = self.parse(&bytes)?;
            let (model, usage) = (parsed.model, parsed.usage);
            let Some(choice) = parsed.choices.into_iter().next() else {
                return Err(self.malformed_event("no choices", ""));
            };
            if let Some(text) = choice.message.content.as_deref().filter(|text| !text.is_empty()) {
                on_text(text);
            }
            return Ok(Answer { message: choice.message, finish_reason: choice.finish_reason, usage, model });
        }
        let mut events = EventStream::default();
        let mut read = 0;
        let mut deadline = tokio::time::Instant::now() + self.idle_timeout;
        loop {
            let chunk = tokio::time::timeout_at(deadline, response.chunk()).await.map_err(|_| idle())?;
            let Some(chunk) = chunk.map_err(|error| self.network_error(&error))? else { break };
            read += chunk.len();
            if read > BODY_CAP {
                return Err(self.too_large(events.text.as_bytes()));
            }
            events.buffer.extend_from_slice(&chunk);
            let before = events.events;
            if self.drain(&mut events, false, on_text)? {
                return Ok(events.into_answer());
            }
            if events.events > before {
                deadline = tokio::time::Instant::now() + self.idle_timeout;
            }
        }
        self.drain(&mut events, true, on_text)?;
        if events.events == 0 {
            return Err(self.broken_stream("the server sent a success status, then closed the stream without an event"));
        }
        if events.finish_reason.is_none() {
            return Err(self.broken_stream("the stream ended before the answer was complete"));
        }
        Ok(events.into_answer())
    }

    /// Reads the complete events in the buffer; an error event is the server's failure, an
    /// unreadable one a malformed answer.
    fn drain(
        &self,
        events: &mut EventStream,
        end: bool,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<bool, LlmError> {
        events.drain(end, on_text).map_err(|problem| match problem {
            Problem::Reported(line) => LlmError::Stream {
                provider: self.name.clone(),
                reason: format!("it reported an error: {}", self.quote(line.as_bytes())),
            },
            Problem::Unreadable(reason, line) => self.malformed_event(&reason, &line),
        })
    }
}

/// The most tool calls one streamed message may make.
const MAX_STREAMED_CALLS: usize = 128;

/// What is wrong with an event of a stream.
#[derive(Debug, PartialEq)]
enum Problem {
    /// The server reported an error in the stream; the event's data.
    Reported(String),
    /// The event cannot be read: why, and its data.
    Unreadable(String, String),
}

/// The server-sent events read so far: the bytes of an unfinished line, and the message they
/// build.
#[derive(Default)]
struct EventStream {
    buffer: Vec<u8>,
    /// `data:` events read.
    events: usize,
    text: String,
    calls: Vec<ToolCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
}

impl EventStream {
    /// Handles every complete line in the buffer (and, at `end`, the unfinished one too).
    /// Returns whether `data: [DONE]` was seen.
    fn drain(&mut self, end: bool, on_text: &mut (dyn FnMut(&str) + Send)) -> Result<bool, Problem> {
        loop {
            let line = match self.buffer.iter().position(|byte| *byte == b'\n') {
                Some(newline) => self.buffer.drain(..=newline).collect::<Vec<_>>(),
                None if end && !self.buffer.is_empty() => std::mem::take(&mut self.buffer),
                None => return Ok(false),
            };
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim_end_matches(['\r', '\n']).strip_prefix("data:") else { continue };
            let data = data.trim();
            if data.is_empty() {
                continue;
            }
            self.events += 1;
            if data == "[DONE]" {
                return Ok(true);
            }
            let chunk: StreamChunk =
                serde_json::from_str(data).map_err(|error| Problem::Unreadable(error.to_string(), data.to_owned()))?;
            if chunk.error.is_some() {
                return Err(Problem::Reported(data.to_owned()));
            }
            if chunk.usage.is_some() {
                self.usage = chunk.usage;
            }
            if chunk.model.is_some() {
                self.model = chunk.model;
            }
            let Some(choice) = chunk.choices.into_iter().next() else { continue };
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
            for piece in choice.delta.tool_calls {
                if piece.index >= MAX_STREAMED_CALLS {
                    let reason = format!("a tool call index above {MAX_STREAMED_CALLS}");
                    return Err(Problem::Unreadable(reason, data.to_owned()));
                }
                while self.calls.len() <= piece.index {
                    let function = FunctionCall { name: String::new(), arguments: String::new() };
                    self.calls.push(ToolCall { id: String::new(), kind: "function".to_owned(), function });
                }
                let call = &mut self.calls[piece.index];
                if let Some(id) = piece.id {
                    call.id = id;
                }
                if let Some(name) = piece.function.name {
                    call.function.name.push_str(&name);
                }
                call.function.arguments.push_str(&piece.function.arguments);
            }
            let text = choice.delta.content.unwrap_or_default();
            if !text.is_empty() {
                self.text.push_str(&text);
                on_text(&text);
            }
        }
    }

    /// The message the events built.
    fn into_answer(self) -> Answer {
        let content = (!self.text.is_empty()).then_some(self.text);
        Answer {
            message: AssistantMessage { content, tool_calls: self.calls },
            finish_reason: self.finish_reason,
            usage: self.usage,
            model: self.model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &mut EventStream, bytes: &[u8], end: bool, seen: &mut Vec<String>) -> Result<bool, Problem> {
        events.buffer.extend_from_slice(bytes);
        events.drain(end, &mut |piece: &str| seen.push(piece.to_owned()))
    }

    #[test]
    fn events_split_anywhere_are_read_in_order() {
        let stream = ": keep-alive\r\n\r\ndata: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\r\n\r\n\
                      data: {\"choices\":[{\"delta\":{\"content\":\"hé\"}}]}\n\n\
                      event: message\ndata:{\"choices\":[{\"delta\":{\"content\":\"llo\"}}]}\n\n\
                      data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n\
                      data: [DONE]\n\n";
        for cut in 1..stream.len() {
            let (first, rest) = stream.as_bytes().split_at(cut);
            let mut events = EventStream::default();
            let mut seen = Vec::new();
            events.buffer.extend_from_slice(first);
            let done = events.drain(false, &mut |piece: &str| seen.push(piece.to_owned())).unwrap();
            let done = done || feed(&mut events, rest, false, &mut seen).unwrap();
            assert!(done, "cut at {cut}");
            assert_eq!(seen.concat(), "héllo");
            assert_eq!(events.text, "héllo");
            assert_eq!(events.usage, Some(Usage { prompt_tokens: Some(3), completion_tokens: Some(2) }));
        }
    }

    #[test]
    fn a_last_line_without_newline_is_read_at_the_end() {
        let mut events = EventStream::default();
        let mut seen = Vec::new();
        let done =
            feed(&mut events, b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}", true, &mut seen).unwrap();
        assert!(!done);
        assert_eq!(seen, ["x"]);
    }

    #[test]
    fn bad_or_error_events_are_reported() {
        let mut seen = Vec::new();
        let problem = feed(&mut EventStream::default(), b"data: {nope\n", false, &mut seen).unwrap_err();
        assert!(matches!(&problem, Problem::Unreadable(reason, _) if reason.contains("key must be a string")));
        let problem =
            feed(&mut EventStream::default(), b"data: {\"error\":{\"message\":\"overloaded\"}}\n", false, &mut seen)
                .unwrap_err();
        assert!(matches!(&problem, Problem::Reported(line) if line.contains("overloaded")), "{problem:?}");
    }

    #[test]
    fn tool_calls_are_built_from_their_pieces() {
        let stream = "data: {\"model\":\"m2\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":null,\
                      \"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\
                      \"function\":{\"name\":\"lookup\",\"arguments\":\"\"}}]}}]}\n\n\
                      data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"q\\\":\"}}]}}]}\n\n\
                      data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}},\
                      {\"index\":1,\"id\":\"c2\",\"function\":{\"name\":\"other\",\"arguments\":\"{}\"}}]}}]}\n\n\
                      data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n";
        let mut events = EventStream::default();
        let mut seen = Vec::new();
        let done = feed(&mut events, stream.as_bytes(), false, &mut seen).unwrap();
        assert!(!done && seen.is_empty());
        assert_eq!(events.events, 4);
        let answer = events.into_answer();
        assert_eq!(answer.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(answer.model.as_deref(), Some("m2"));
        assert_eq!(answer.message.content, None);
        let calls: Vec<(&str, &str, &str)> = answer
            .message
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.function.name.as_str(), c.function.arguments.as_str()))
            .collect();
        assert_eq!(calls, [("c1", "lookup", "{\"q\":1}"), ("c2", "other", "{}")]);
    }
}
