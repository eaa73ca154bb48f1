//! Context: counting tokens and compacting text (summaries, gate outputs, errors) within a budget.
