//! The rules of a plan that grows while it runs (`runner do`), as tables (the harness is
//! `support/transcript.rs`): each task the planner writes joins the plan and may start at
//! once, a task that cannot join is recorded as a rejected line, and the run neither pauses
//! nor ends until the planner has finished; a crash replays it all from the log.

#[path = "support/transcript.rs"]
mod transcript;

use transcript::check;

#[test]
fn a_task_starts_as_soon_as_its_line_arrives_and_its_dependencies_are_done() {
    check(
        r#"
        workflow:
          - {id: fetch, agent: m, input: x}
        "#,
        r#"
        > start growing
        RunCreated
        TaskDispatched fetch#1
        > plan 3 {"id": "other", "agent": "m", "input": "y"}
        TaskPlanned other line 3
        TaskDispatched other#1
        > plan 4 {"id": "report", "agent": "m", "input": "{{ tasks.fetch.output }}", "depends_on": ["fetch"]}
        TaskPlanned report line 4
        > ok fetch#1 data
        TaskSucceeded fetch#1
        TaskDispatched report#1 input="data"
        > ok other#1
        TaskSucceeded other#1
        > ok report#1
        TaskSucceeded report#1
        > close
        PlanWritten
        RunCompleted succeeded: all 3 tasks succeeded
        "#,
    );
}

#[test]
fn the_run_does_not_end_while_the_planner_writes_even_when_every_task_is_done() {
    check(
        r#"
        workflow:
          - {id: a, agent: m, input: x}
        "#,
        r#"
        > start growing
        RunCreated
        TaskDispatched a#1
        > ok a#1
        TaskSucceeded a#1
        > crash
        > plan 3 {"id": "b", "agent": "m", "input": "y", "depends_on": ["a"]}
        TaskPlanned b line 3
        TaskDispatched b#1
        > ok b#1
        TaskSucceeded b#1
        > close
        PlanWritten
        RunCompleted succeeded: all 2 tasks succeeded
        "#,
    );
}

#[test]
fn a_task_that_cannot_join_is_a_rejected_line_and_the_plan_goes_on() {
    check(
        r#"
        workflow:
          - {id: a, agent: m, input: x}
        "#,
        r#"
        > start growing
        RunCreated
        TaskDispatched a#1
        > plan 3 {"id": "a", "agent": "m", "input": "again"}
        LineRejected line 3 a plan::duplicate_task: the plan already has a task `a`
        > plan 4 {"id": "b", "agent": "ghost", "input": "y"}
        LineRejected line 4 b plan::unknown_agent: task `b` names agent `ghost`, which the plan does not define
        > plan 5 {"id": "c", "agent": "m", "input": "y", "depends_on": ["later"]}
        LineRejected line 5 c plan::unknown_dependency: task `c` depends on `later`, which no earlier line wrote
        > reject-line 6 author::line_json the line is not JSON
        LineRejected line 6 - author::line_json: the line is not JSON
        > ok a#1
        TaskSucceeded a#1
        > close
        PlanWritten
        RunCompleted succeeded: all 1 tasks succeeded
        "#,
    );
}

#[test]
fn a_planner_that_stops_midway_fails_the_run_once_what_it_wrote_is_done() {
    check(
        r#"
        workflow:
          - {id: a, agent: m, input: x}
        "#,
        r#"
        > start growing
        RunCreated
        TaskDispatched a#1
        > close the stream broke off
        PlanWritten: the stream broke off
        > ok a#1
        TaskSucceeded a#1
        RunCompleted failed: the planner stopped after 1 tasks (1 succeeded): the stream broke off
        "#,
    );
}

#[test]
fn a_review_waits_without_pausing_the_run_until_the_plan_is_written() {
    check(
        r#"
        workflow:
          - {id: draft, agent: m, input: x}
        "#,
        r#"
        > start growing
        RunCreated
        TaskDispatched draft#1
        > plan 3 {"id": "check", "kind": "human_review", "prompt": "Good?", "depends_on": ["draft"]}
        TaskPlanned check line 3
        > ok draft#1
        TaskSucceeded draft#1
        ReviewRequested check [draft="ok"]: Good?
        > close
        PlanWritten
        RunPaused: task `check` waits for a review decision
        > approve check
        ReviewDecided check approved
        > continue
        RunResumed
        RunCompleted succeeded: all 2 tasks succeeded
        "#,
    );
}

#[test]
fn a_plan_that_does_not_grow_takes_no_planner_commands_and_a_written_one_no_more() {
    check(
        r#"
        workflow:
          - {id: a, agent: m, input: x}
        "#,
        r#"
        > start
        RunCreated
        TaskDispatched a#1
        > plan 2 {"id": "b", "agent": "m", "input": "y"}
        refused: the run's plan is not being written: no task can join it
        > close
        refused: the run's plan is not being written: no task can join it
        "#,
    );
    check(
        r#"
        workflow:
          - {id: a, agent: m, input: x}
        "#,
        r#"
        > start growing
        RunCreated
        TaskDispatched a#1
        > close
        PlanWritten
        > plan 3 {"id": "b", "agent": "m", "input": "y"}
        refused: the run's plan is not being written: no task can join it
        > cancel
        TaskFailed a#1 cancelled: cancelled
        RunCancelled: stop
        "#,
    );
}
