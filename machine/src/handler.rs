//! The shape of an event-sourced decision maker, so a program can drive a run over its own
//! infrastructure (a message bus, an HTTP service) with the same machine the CLI uses.

/// A pure machine: commands in, events out; its state is the fold of its events.
pub trait Handler: Sized {
    /// What the outside world asks.
    type Command;
    /// What the machine records.
    type Event;
    /// Why a command was refused.
    type Error;

    /// Decides what a command means: the events it causes, already applied to `self`.
    fn process(&mut self, command: Self::Command) -> Result<Vec<Self::Event>, Self::Error>;

    /// Applies one event to the state; never fails and never decides anything.
    fn apply(&mut self, event: &Self::Event);

    /// The state after a sequence of events.
    fn fold(events: &[Self::Event]) -> Self;
}
