//! The journal an llm attempt writes as it goes. Each model turn, tool call and tool result
//! goes to the driver as a command; the driver answers once the events it caused are durable,
//! so a tool never runs before its call is on record (write-ahead, as for dispatches), and a
//! later attempt of the task reads the conversation back instead of repeating it. An attempt a
//! worker carries out writes the same entries through the database (`crate::cluster`).

use tokio::sync::{mpsc, oneshot};

use crate::event::{ErrorClass, ModelTurn, Tokens, ToolCallFinished};
use crate::runtime::Reply;
use machine::Command;
use machine::conversation::{CallState, Conversation, ToolCallRecord};

/// The driver's answer to a journal entry, given once what it caused is durable.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Verdict {
    /// The turn or result is recorded.
    Recorded,
    /// The tool call is recorded as started: run it.
    Run,
    /// The call waits for a person's approval: the attempt ends here, and a later one goes
    /// on from the conversation once somebody decides.
    Wait,
    /// The call is answered without running: this text is its result.
    Answered(String),
    /// The attempt no longer counts (the run ended, it was cut short, the driver stopped).
    Stop,
    /// The task's conversation as recorded now: the answer to [`Journal::conversation`].
    Conversation(Box<Conversation>),
}

/// A journal entry on its way to the driver, with where its verdict goes.
#[derive(Debug)]
pub struct Entry {
    pub(crate) ask: Ask,
    pub(crate) reply: oneshot::Sender<Verdict>,
}

/// What a journal entry asks of the driver.
#[derive(Debug)]
pub(crate) enum Ask {
    /// Process this command: a turn, a tool call or a tool's result.
    Record(Box<Command>),
    /// Give the conversation of `task` as recorded now, if `attempt` is its current attempt.
    Read { task: String, attempt: u32 },
}

/// What an attempt writes its conversation to, and the conversation recorded before it.
#[derive(Debug, Clone)]
pub struct Journal {
    sender: mpsc::UnboundedSender<Entry>,
    task: String,
    attempt: u32,
    /// The task's conversation so far: turns and calls earlier attempts recorded.
    pub recorded: Conversation,
}

impl Journal {
    /// A journal for attempt `attempt` of `task`, sending to a driver's `sender`.
    pub fn new(sender: mpsc::UnboundedSender<Entry>, task: String, attempt: u32, recorded: Conversation) -> Self {
        Journal { sender, task, attempt, recorded }
    }

    /// Turn `turn` of this attempt, with no text, calls, tokens or finish reason yet: the
    /// caller fills in what the model answered and hands it to [`Journal::turn`].
    pub fn model_turn(&self, turn: u32) -> ModelTurn {
        ModelTurn {
            task: self.task.clone(),
            attempt: self.attempt,
            turn,
            content: None,
            tool_calls: Vec::new(),
            tokens: None,
            finish_reason: None,
        }
    }

    /// The task this journal's attempt belongs to, and the attempt's number.
    pub fn attempt(&self) -> (&str, u32) {
        (&self.task, self.attempt)
    }

    /// Records a model turn.
    pub async fn turn(&self, turn: ModelTurn) -> Verdict {
        self.send(Command::ModelTurn(turn)).await
    }

    /// Asks whether a tool call may run: [`Verdict::Run`], [`Verdict::Wait`] or
    /// [`Verdict::Answered`].
    pub async fn call(&self, turn: u32, call: ToolCallRecord, reason: String) -> Verdict {
        let (task, attempt) = (self.task.clone(), self.attempt);
        self.send(Command::CallTool { task, attempt, turn, call, reason }).await
    }

    /// Records a tool call's result.
    pub async fn result(&self, call_id: String, tool: String, ok: bool, output: String) -> Verdict {
        let (task, attempt) = (self.task.clone(), self.attempt);
        self.send(Command::ToolResult(ToolCallFinished { task, attempt, call_id, tool, ok, output })).await
    }

    /// The task's conversation as recorded now, including what this attempt recorded: what
    /// an attempt taken over by another worker goes on from. [`Verdict::Stop`] when the
    /// attempt no longer counts.
    pub async fn conversation(&self) -> Verdict {
        self.ask(Ask::Read { task: self.task.clone(), attempt: self.attempt }).await
    }

    /// Hands `command` to the driver as this journal's entry and waits for its verdict.
    pub(crate) async fn send(&self, command: Command) -> Verdict {
        self.ask(Ask::Record(Box::new(command))).await
    }

    async fn ask(&self, ask: Ask) -> Verdict {
        let (reply, verdict) = oneshot::channel();
        if self.sender.send(Entry { ask, reply }).is_err() {
            return Verdict::Stop;
        }
        verdict.await.unwrap_or(Verdict::Stop)
    }
}

/// The verdict on a `CallTool` the machine took, from the call's state after it.
pub(crate) fn call_verdict(state: Option<&CallState>) -> Verdict {
    match state {
        Some(CallState::Started) => Verdict::Run,
        Some(CallState::Asked) => Verdict::Wait,
        Some(CallState::Finished(output)) => Verdict::Answered(output.clone()),
        Some(CallState::Approved | CallState::Rejected(_)) | None => Verdict::Stop,
    }
}

/// The reply of an attempt that ends because its call waits for approval. The machine ended
/// the attempt when it recorded the request, so this reply is not recorded.
pub(crate) fn waiting(tool: &str) -> Reply {
    Reply::Failure {
        error: format!("the call of `{tool}` waits for approval"),
        class: ErrorClass::Cancelled,
        tokens: None,
    }
}

/// The reply of an attempt the run no longer counts.
pub(crate) fn stopped(tokens: Option<Tokens>) -> Reply {
    Reply::Failure { error: "the attempt no longer counts".to_owned(), class: ErrorClass::Cancelled, tokens }
}
