//! The run state machine's rules as tables: each case is a small plan and a transcript of the
//! commands given to a run of it, each followed by the events it causes, one line each (the
//! format and the steps are in `support/transcript.rs`). A case fails with a diff of the
//! transcripts. The engine's driver tests (`engine/tests/policies.rs`) run the same rules end
//! to end with agents; these pin the machine's decisions alone, command by command.

#[path = "support/transcript.rs"]
mod transcript;

use transcript::check;

mod scheduling {
    use super::check;

    #[test]
    fn eager_starts_every_ready_task_longest_chain_first() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x, depends_on: [b]}
            ",
            "
            > start
            RunCreated
            TaskDispatched b#1
            TaskDispatched a#1
            > ok b#1
            TaskSucceeded b#1
            TaskDispatched c#1
            > ok c#1
            TaskSucceeded c#1
            > ok a#1
            TaskSucceeded a#1
            RunCompleted succeeded: all 3 tasks succeeded
            ",
        );
    }

    #[test]
    fn a_task_waits_for_every_dependency() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x, depends_on: [a, b]}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            > ok a#1
            TaskSucceeded a#1
            > ok b#1
            TaskSucceeded b#1
            TaskDispatched c#1
            > ok c#1
            TaskSucceeded c#1
            RunCompleted succeeded: all 3 tasks succeeded
            ",
        );
    }

    #[test]
    fn max_concurrency_caps_the_attempts_in_flight() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x}
            control_logic: {max_concurrency: 2}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            > ok b#1
            TaskSucceeded b#1
            TaskDispatched c#1
            ",
        );
    }

    #[test]
    fn a_full_parallel_group_parks_its_members_but_not_other_tasks() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, parallel_group: g}
              - {id: b, agent: m, input: x, parallel_group: g}
              - {id: c, agent: m, input: x}
            control_logic: {parallel_groups: {g: {max_concurrency: 1}}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched c#1
            > ok c#1
            TaskSucceeded c#1
            > ok a#1
            TaskSucceeded a#1
            TaskDispatched b#1
            ",
        );
    }

    #[test]
    fn phased_runs_one_ungrouped_task_at_a_time_and_phases_in_order() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x, depends_on: [a]}
            control_logic: {strategy: phased}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > ok a#1
            TaskSucceeded a#1
            TaskDispatched b#1
            > ok b#1
            TaskSucceeded b#1
            TaskDispatched c#1
            ",
        );
    }

    #[test]
    fn phased_starts_a_group_as_one_unit_and_finishes_it_before_the_next() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, parallel_group: g}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x, parallel_group: g}
            control_logic: {strategy: phased}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched c#1
            > ok a#1
            TaskSucceeded a#1
            > ok c#1
            TaskSucceeded c#1
            TaskDispatched b#1
            ",
        );
    }

    #[test]
    fn phased_holds_a_unit_within_its_groups_limit() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, parallel_group: g}
              - {id: b, agent: m, input: x, parallel_group: g}
              - {id: c, agent: m, input: x}
            control_logic: {strategy: phased, parallel_groups: {g: {max_concurrency: 1}}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > ok a#1
            TaskSucceeded a#1
            TaskDispatched b#1
            > ok b#1
            TaskSucceeded b#1
            TaskDispatched c#1
            ",
        );
    }

    #[test]
    fn sequential_runs_one_task_at_a_time_in_list_order() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x, depends_on: [a]}
            ",
            "
            > start sequential
            RunCreated
            TaskDispatched a#1
            > ok a#1
            TaskSucceeded a#1
            TaskDispatched b#1
            > ok b#1
            TaskSucceeded b#1
            TaskDispatched c#1
            ",
        );
    }

    #[test]
    fn a_strategy_given_at_start_overrides_the_plans() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x}
            control_logic: {strategy: phased}
            ",
            "
            > start eager
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            ",
        );
    }

    #[test]
    fn a_plans_sequential_strategy_chains_its_list_so_a_review_holds_what_follows() {
        check(
            "
            workflow:
              - {id: check, type: human_review, prompt: go?}
              - {id: a, agent: m, input: x}
            control_logic: {strategy: sequential}
            ",
            "
            > start
            RunCreated
            ReviewRequested check []: go?
            RunPaused: task `check` waits for a review decision
            > approve check
            ReviewDecided check approved
            > continue
            RunResumed
            TaskDispatched a#1
            ",
        );
    }

    #[test]
    fn sequential_runs_a_retry_before_anything_else() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, backoff: 1s}}
              - {id: b, agent: m, input: x}
            ",
            "
            > start sequential
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 1000ms
            > timer a
            RetryDue a
            TaskDispatched a#2
            ",
        );
    }

    #[test]
    fn a_full_slice_holds_the_rest_without_pausing_or_ending_the_run() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x}
            ",
            "
            > limit 2
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            > ok a#1
            TaskSucceeded a#1
            > ok b#1
            TaskSucceeded b#1
            > next-slice
            TaskDispatched c#1
            > ok c#1
            TaskSucceeded c#1
            RunCompleted succeeded: all 3 tasks succeeded
            ",
        );
    }

    /// `schedule/mod.rs` says a review starts whatever the concurrency limits, and `phased`
    /// starts one so; `eager`'s round stops at `max_concurrency` before it looks at what is
    /// queued, so a review waits for a slot it does not take. This pins what the machine does.
    #[test]
    fn under_eager_a_review_behind_a_full_max_concurrency_waits_for_a_slot() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: check, type: human_review, prompt: go?}
              - {id: b, agent: m, input: x}
            control_logic: {max_concurrency: 1}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > ok a#1
            TaskSucceeded a#1
            ReviewRequested check []: go?
            TaskDispatched b#1
            ",
        );
    }

    #[test]
    fn phased_waits_for_a_retry_before_the_next_unit_of_its_phase() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, backoff: 1ms}}
              - {id: b, agent: m, input: x}
            control_logic: {strategy: phased}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 1ms
            > timer a
            RetryDue a
            TaskDispatched a#2
            > ok a#2
            TaskSucceeded a#2
            TaskDispatched b#1
            ",
        );
    }

    #[test]
    fn phased_moves_on_past_a_skipped_task() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: skip}
              - {id: b, agent: m, input: x, depends_on: [a]}
            control_logic: {strategy: phased}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            TaskSkipped a: failed: boom
            TaskDispatched b#1
            ",
        );
    }
}

mod failure {
    use super::check;

    #[test]
    fn fail_by_default_ends_the_run_and_cancels_what_runs() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x, depends_on: [a]}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            TaskFailed b#1 cancelled: cancelled: the run failed
            RunCompleted failed: task `a` failed: boom
            > ok b#1
            ",
        );
    }

    #[test]
    fn skip_keeps_dependents_running_and_the_run_ends_partial() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: skip}
              - {id: b, agent: m, input: 'a is {{ tasks.a.status }}', depends_on: [a]}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            TaskSkipped a: failed: boom
            TaskDispatched b#1 input=\"a is skipped\"
            > ok b#1
            TaskSucceeded b#1
            RunCompleted partial: 1 of 2 tasks did not succeed: a
            ",
        );
    }

    #[test]
    fn retry_waits_its_backoff_then_runs_a_new_attempt() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 3, backoff: 100ms}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 100ms
            > timer a
            RetryDue a
            TaskDispatched a#2
            > ok a#2
            TaskSucceeded a#2
            RunCompleted succeeded: all 1 tasks succeeded
            ",
        );
    }

    #[test]
    fn backoff_doubles_up_to_max_backoff() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 4, backoff: 100ms, max_backoff: 250ms}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 100ms
            > timer a
            RetryDue a
            TaskDispatched a#2
            > fail a#2
            TaskFailed a#2 agent retryable: boom
            RetryScheduled a#3 200ms
            > timer a
            RetryDue a
            TaskDispatched a#3
            > fail a#3
            TaskFailed a#3 agent retryable: boom
            RetryScheduled a#4 250ms
            ",
        );
    }

    #[test]
    fn jitter_cuts_at_most_half_the_backoff() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 3, backoff: 1s}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1 jitter=0.5
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 750ms of 1000ms
            > timer a
            RetryDue a
            TaskDispatched a#2
            > fail a#2 jitter=1
            TaskFailed a#2 agent retryable: boom
            RetryScheduled a#3 1000ms of 2000ms
            ",
        );
    }

    #[test]
    fn retries_run_out_into_then_skip() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 2, backoff: 1ms, then: skip}}
              - {id: b, agent: m, input: x, depends_on: [a]}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 1ms
            > timer a
            RetryDue a
            TaskDispatched a#2
            > fail a#2 down again
            TaskFailed a#2 agent retryable: down again
            TaskSkipped a: failed: down again
            TaskDispatched b#1
            ",
        );
    }

    #[test]
    fn retries_run_out_into_fail_by_default() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 2, backoff: 1ms}}
              - {id: b, agent: m, input: x, depends_on: [a]}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 1ms
            > timer a
            RetryDue a
            TaskDispatched a#2
            > fail a#2
            TaskFailed a#2 agent retryable: boom
            RunCompleted failed: task `a` failed: boom
            ",
        );
    }

    #[test]
    fn a_critical_task_that_runs_out_of_retries_fails_the_run_saying_so() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, critical: true, on_failure: {action: retry, max_attempts: 2, backoff: 1ms}}
              - {id: b, agent: m, input: x}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            > ok b#1
            TaskSucceeded b#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 1ms
            > timer a
            RetryDue a
            TaskDispatched a#2
            > fail a#2
            TaskFailed a#2 agent retryable: boom
            RunCompleted failed: critical task `a` failed: boom
            ",
        );
    }

    #[test]
    fn a_permanent_failure_is_never_retried() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 3, then: skip}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1 permanent no key
            TaskFailed a#1 permanent: no key
            TaskSkipped a: failed: no key
            RunCompleted partial: 1 of 1 tasks did not succeed: a
            ",
        );
    }

    #[test]
    fn retry_on_transient_sends_an_agents_failure_straight_to_then() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 3, then: skip, retry_on: transient}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1 agent
            TaskFailed a#1 agent: boom
            TaskSkipped a: failed: boom
            RunCompleted partial: 1 of 1 tasks did not succeed: a
            ",
        );
    }

    #[test]
    fn retry_on_transient_retries_timeouts_and_service_failures() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 3, backoff: 10ms, retry_on: transient}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1 timeout
            TaskFailed a#1 timeout retryable: boom
            RetryScheduled a#2 10ms
            > timer a
            RetryDue a
            TaskDispatched a#2
            > fail a#2 transient 503
            TaskFailed a#2 transient retryable: 503
            RetryScheduled a#3 20ms
            ",
        );
    }

    #[test]
    fn a_failed_verification_is_a_failed_attempt_whose_reason_only_the_next_attempt_is_told() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: give x, on_failure: {action: retry, max_attempts: 3, backoff: 10ms}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > verify a#1 no field x
            VerificationFailed a#1: no field x
            TaskFailed a#1 verification retryable: verification failed: no field x
            RetryScheduled a#2 10ms
            > timer a
            RetryDue a
            TaskDispatched a#2 input=\"give x\\n\\nThe previous answer failed verification: no field x\\nAnswer again and fix this.\"
            > fail a#2
            TaskFailed a#2 agent retryable: boom
            RetryScheduled a#3 20ms
            > timer a
            RetryDue a
            TaskDispatched a#3
            ",
        );
    }

    #[test]
    fn retry_on_transient_does_not_retry_a_failed_verification() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, then: skip, retry_on: transient}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > verify a#1 not json
            VerificationFailed a#1: not json
            TaskFailed a#1 verification: verification failed: not json
            TaskSkipped a: failed: verification failed: not json
            RunCompleted partial: 1 of 1 tasks did not succeed: a
            ",
        );
    }

    #[test]
    fn an_input_that_cannot_render_fails_its_attempt_for_good() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: '{{ tasks.a.output.missing }}', depends_on: [a], on_failure: {action: retry, then: skip}}
            ",
            r#"
            > start
            RunCreated
            TaskDispatched a#1
            > ok a#1 {"title": "T"}
            TaskSucceeded a#1
            TaskDispatched b#1 input=""
            TaskFailed b#1 permanent: cannot render the input: `tasks.a.output.missing` is undefined (line 1 of the template)
            TaskSkipped b: failed: cannot render the input: `tasks.a.output.missing` is undefined (line 1 of the template)
            RunCompleted partial: 1 of 2 tasks did not succeed: b
            "#,
        );
    }

    #[test]
    fn replan_asks_the_planner_and_the_run_waits_for_it() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: replan}
              - {id: b, agent: m, input: x, depends_on: [a]}
              - {id: c, agent: m, input: x}
              - {id: d, agent: m, input: x}
            control_logic: {planner: m}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched c#1
            TaskDispatched d#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            ReplanRequested a: boom
            > ok c#1
            TaskSucceeded c#1
            > replan-failed c not asked
            > replan-failed a no usable plan
            ReplanFailed a: no usable plan
            TaskFailed d#1 cancelled: cancelled: the run failed
            RunCompleted failed: task `a` failed: boom; replanning failed: no usable plan
            ",
        );
    }

    #[test]
    fn retries_run_out_into_then_replan() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 2, backoff: 1ms, then: replan}}
            control_logic: {planner: m}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 1ms
            > timer a
            RetryDue a
            TaskDispatched a#2
            > fail a#2
            TaskFailed a#2 agent retryable: boom
            ReplanRequested a: boom
            ",
        );
    }

    #[test]
    fn replan_past_max_replans_fails_the_task_saying_why() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: replan}
            control_logic: {planner: m, max_replans: 0}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RunCompleted failed: task `a` failed: boom; the run has already replanned 0 times (max_replans)
            ",
        );
    }

    #[test]
    fn a_replan_under_way_counts_against_max_replans() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: replan}
              - {id: b, agent: m, input: x, on_failure: replan}
            control_logic: {planner: m, max_replans: 1}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            ReplanRequested a: boom
            > fail b#1
            TaskFailed b#1 agent retryable: boom
            RunCompleted failed: task `b` failed: boom; the run has already replanned 0 times, and 1 replan is under way (max_replans)
            ",
        );
    }

    #[test]
    fn an_empty_output_under_replan_on_empty_result_is_replanned() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
            control_logic: {planner: m, replan_on_empty_result: true}
            ",
            r#"
            > start
            RunCreated
            TaskDispatched a#1
            > ok a#1 ""
            TaskFailed a#1 verification: the output was empty (replan_on_empty_result)
            ReplanRequested a: the output was empty (replan_on_empty_result)
            "#,
        );
    }

    #[test]
    fn an_empty_output_under_replan_on_empty_result_without_a_planner_fails_the_run() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
            control_logic: {replan_on_empty_result: true}
            ",
            r#"
            > start
            RunCreated
            TaskDispatched a#1
            > ok a#1 ""
            TaskFailed a#1 verification: the output was empty (replan_on_empty_result)
            RunCompleted failed: task `a` failed: the output was empty (replan_on_empty_result); its policy is to replan, but `control_logic.planner` names no planner agent
            "#,
        );
    }

    #[test]
    fn results_for_an_attempt_no_longer_current_change_nothing() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, backoff: 1ms}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 1ms
            > ok a#1
            > timer a
            RetryDue a
            TaskDispatched a#2
            > timer a
            > fail a#1
            > ok a#2
            TaskSucceeded a#2
            RunCompleted succeeded: all 1 tasks succeeded
            ",
        );
    }

    #[test]
    fn a_result_for_a_task_the_plan_lacks_is_refused() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > ok zz#1
            refused: the plan has no task `zz`
            > ok a#1
            TaskSucceeded a#1
            RunCompleted succeeded: all 1 tasks succeeded
            ",
        );
    }
}

mod people {
    use super::check;

    const REVIEW: &str = "
        workflow:
          - {id: draft, agent: m, input: x}
          - {id: review, type: human_review, depends_on: [draft], prompt: 'Publish {{ tasks.draft.output }}?', POLICY}
          - {id: publish, agent: m, input: x, depends_on: [review]}
        ";

    #[test]
    fn an_approved_review_lets_its_dependents_run_after_continue() {
        check(
            &REVIEW.replace("POLICY", "on_failure: fail"),
            "
            > start
            RunCreated
            TaskDispatched draft#1
            > ok draft#1 the draft
            TaskSucceeded draft#1
            ReviewRequested review [draft=\"the draft\"]: Publish the draft?
            RunPaused: task `review` waits for a review decision
            > approve review fine
            ReviewDecided review approved: fine
            > continue
            RunResumed
            TaskDispatched publish#1
            > ok publish#1
            TaskSucceeded publish#1
            RunCompleted succeeded: all 3 tasks succeeded
            ",
        );
    }

    #[test]
    fn a_review_decided_while_others_run_lets_dependents_go_at_once() {
        check(
            "
            workflow:
              - {id: check, type: human_review, prompt: go?}
              - {id: a, agent: m, input: x, depends_on: [check]}
              - {id: b, agent: m, input: x}
            ",
            "
            > start
            RunCreated
            ReviewRequested check []: go?
            TaskDispatched b#1
            > approve check
            ReviewDecided check approved
            TaskDispatched a#1
            ",
        );
    }

    #[test]
    fn a_rejected_review_under_fail_fails_the_run() {
        check(
            &REVIEW.replace("POLICY", "on_failure: fail"),
            "
            > start
            RunCreated
            TaskDispatched draft#1
            > ok draft#1
            TaskSucceeded draft#1
            ReviewRequested review [draft=\"ok\"]: Publish ok?
            RunPaused: task `review` waits for a review decision
            > reject review tone
            ReviewDecided review rejected: tone
            TaskFailed review#1 permanent: rejected: tone
            RunCompleted failed: task `review` failed: rejected: tone
            ",
        );
    }

    #[test]
    fn a_rejected_review_under_skip_lets_dependents_run_after_continue() {
        check(
            &REVIEW.replace("POLICY", "on_failure: skip"),
            "
            > start
            RunCreated
            TaskDispatched draft#1
            > ok draft#1
            TaskSucceeded draft#1
            ReviewRequested review [draft=\"ok\"]: Publish ok?
            RunPaused: task `review` waits for a review decision
            > reject review
            ReviewDecided review rejected
            TaskFailed review#1 permanent: rejected
            TaskSkipped review: failed: rejected
            > continue
            RunResumed
            TaskDispatched publish#1
            > ok publish#1
            TaskSucceeded publish#1
            RunCompleted partial: 1 of 3 tasks did not succeed: review
            ",
        );
    }

    #[test]
    fn a_rejection_is_not_retried() {
        check(
            &REVIEW.replace("POLICY", "on_failure: {action: retry, then: skip}"),
            "
            > start
            RunCreated
            TaskDispatched draft#1
            > ok draft#1
            TaskSucceeded draft#1
            ReviewRequested review [draft=\"ok\"]: Publish ok?
            RunPaused: task `review` waits for a review decision
            > reject review
            ReviewDecided review rejected
            TaskFailed review#1 permanent: rejected
            TaskSkipped review: failed: rejected
            ",
        );
    }

    #[test]
    fn a_decision_for_what_is_no_waiting_review_is_refused() {
        check(
            &REVIEW.replace("POLICY", "on_failure: fail"),
            "
            > start
            RunCreated
            TaskDispatched draft#1
            > approve draft
            refused: task `draft` is not a human review waiting for a decision
            > approve review
            refused: task `review` is not a human review waiting for a decision
            ",
        );
    }

    #[test]
    fn a_review_does_not_stall_a_sequential_run() {
        check(
            "
            workflow:
              - {id: check, type: human_review, prompt: go?}
              - {id: a, agent: m, input: x}
            ",
            "
            > start sequential
            RunCreated
            ReviewRequested check []: go?
            TaskDispatched a#1
            > ok a#1
            TaskSucceeded a#1
            RunPaused: task `check` waits for a review decision
            > approve check
            ReviewDecided check approved
            > continue
            RunResumed
            RunCompleted succeeded: all 2 tasks succeeded
            ",
        );
    }

    #[test]
    fn a_question_pauses_only_its_task_and_the_answer_goes_into_the_next_attempt() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: report}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x, depends_on: [a]}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            > ask a#1 Which year?
            ClarificationRequested a: Which year?
            > ok b#1
            TaskSucceeded b#1
            RunPaused: task `a` asks: Which year?
            > answer a 2024
            ClarificationProvided a: 2024
            > continue
            RunResumed
            TaskDispatched a#2 input=\"report\\n\\nClarification: 2024\"
            > ok a#2
            TaskSucceeded a#2
            TaskDispatched c#1
            ",
        );
    }

    #[test]
    fn an_answer_while_the_run_goes_on_dispatches_at_once() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: report}
              - {id: b, agent: m, input: x}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            > ask a#1 Which year?
            ClarificationRequested a: Which year?
            > answer a 2024
            ClarificationProvided a: 2024
            TaskDispatched a#2 input=\"report\\n\\nClarification: 2024\"
            ",
        );
    }

    #[test]
    fn an_answer_for_a_task_that_asked_nothing_is_refused() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > answer a 2024
            refused: task `a` is not waiting for an answer
            ",
        );
    }

    #[test]
    fn an_answered_question_does_not_use_up_a_retry() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, max_attempts: 2, backoff: 1ms}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > ask a#1 Which year?
            ClarificationRequested a: Which year?
            RunPaused: task `a` asks: Which year?
            > answer a 2024
            ClarificationProvided a: 2024
            > continue
            RunResumed
            TaskDispatched a#2 input=\"x\\n\\nClarification: 2024\"
            > fail a#2
            TaskFailed a#2 agent retryable: boom
            RetryScheduled a#3 1ms
            ",
        );
    }

    #[test]
    fn a_question_in_an_early_phase_pauses_a_phased_run() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x, depends_on: [b]}
            control_logic: {strategy: phased}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > ask a#1 Which year?
            ClarificationRequested a: Which year?
            TaskDispatched b#1
            > ok b#1
            TaskSucceeded b#1
            RunPaused: task `a` asks: Which year?
            ",
        );
    }

    #[test]
    fn every_answer_goes_into_later_attempts() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: report}
              - {id: b, agent: m, input: x}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            > ask a#1 Which year?
            ClarificationRequested a: Which year?
            > answer a 2024
            ClarificationProvided a: 2024
            TaskDispatched a#2 input=\"report\\n\\nClarification: 2024\"
            > ask a#2 Which region?
            ClarificationRequested a: Which region?
            > answer a EMEA
            ClarificationProvided a: EMEA
            TaskDispatched a#3 input=\"report\\n\\nClarification: 2024\\n\\nClarification: EMEA\"
            ",
        );
    }
}

mod lifecycle {
    use super::check;

    #[test]
    fn cancel_ends_what_runs_and_the_run_and_later_commands_are_refused() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            > ok a#1
            TaskSucceeded a#1
            > cancel enough
            TaskFailed b#1 cancelled: cancelled
            RunCancelled: enough
            > ok b#1
            > continue
            refused: the run has already ended (cancelled)
            > cancel again
            refused: the run has already ended (cancelled)
            ",
        );
    }

    #[test]
    fn a_paused_run_can_be_cancelled() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > ask a#1 Which year?
            ClarificationRequested a: Which year?
            RunPaused: task `a` asks: Which year?
            > cancel
            RunCancelled: stop
            > answer a 2024
            refused: the run has already ended (cancelled)
            ",
        );
    }

    #[test]
    fn commands_before_start_and_a_second_start_are_refused() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
            ",
            "
            > continue
            refused: the run has not started
            > cancel
            refused: the run has not started
            > start
            RunCreated
            TaskDispatched a#1
            > start
            refused: the run has already started
            ",
        );
    }

    #[test]
    fn continue_after_a_crash_runs_an_unfinished_attempt_again() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x, depends_on: [a]}
              - {id: c, agent: m, input: x}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched c#1
            > ok c#1
            TaskSucceeded c#1
            > crash
            > continue
            RunResumed
            TaskDispatched a#2
            > ok a#1
            > ok a#2
            TaskSucceeded a#2
            TaskDispatched b#1
            ",
        );
    }

    #[test]
    fn continue_after_a_crash_cuts_a_retrys_backoff_short() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, backoff: 1s}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 1000ms
            > crash
            > continue
            RunResumed
            TaskDispatched a#2
            > timer a
            ",
        );
    }

    #[test]
    fn continue_after_a_crash_keeps_a_parallel_groups_limit() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, parallel_group: g}
              - {id: b, agent: m, input: x, parallel_group: g}
            control_logic: {parallel_groups: {g: {max_concurrency: 1}}}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > crash
            > continue
            RunResumed
            TaskDispatched a#2
            > ok a#2
            TaskSucceeded a#2
            TaskDispatched b#1
            ",
        );
    }

    #[test]
    fn continue_records_nothing_while_the_run_still_waits_for_a_person() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > ask a#1 Which year?
            ClarificationRequested a: Which year?
            RunPaused: task `a` asks: Which year?
            > continue
            > crash
            > continue
            ",
        );
    }

    #[test]
    fn a_task_reused_from_an_earlier_run_never_runs_and_its_output_is_read() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: 'got {{ tasks.a.output }}', depends_on: [a]}
            ",
            "
            > start reuse a=old zz=gone
            RunCreated
            TaskReused a \"old\"
            TaskDispatched b#1 input=\"got old\"
            > ok a#1
            > ok b#1
            TaskSucceeded b#1
            RunCompleted succeeded: all 2 tasks succeeded
            ",
        );
    }

    #[test]
    fn a_run_whose_every_task_is_reused_ends_at_start() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x, depends_on: [a]}
            ",
            "
            > start reuse a=1 b=2
            RunCreated
            TaskReused a \"1\"
            TaskReused b \"2\"
            RunCompleted succeeded: all 2 tasks succeeded
            ",
        );
    }

    #[test]
    fn continue_after_a_crash_stops_holding_tasks_for_the_compactor_agents_summary() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: 'So far: {{ context_summary }}', depends_on: [a]}
            control_logic: {compactor: m}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > ok a#1
            TaskSucceeded a#1
            > crash
            > continue
            RunResumed
            TaskDispatched b#1 input=\"So far: \"
            ",
        );
    }
}

mod budgets {
    use super::check;

    #[test]
    fn a_spent_token_budget_skips_what_is_left_and_a_critical_task_fails_the_run() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: one two three four, depends_on: [a], critical: true}
              - {id: c, agent: m, input: x, depends_on: [a]}
            control_logic: {token_budget: 10}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > ok a#1 tokens=3+4
            TaskSucceeded a#1 tokens=3+4
            BudgetExhausted: the token budget is spent: 7 of 10 tokens used, and task `b` would need about 4 more
            TaskSkipped b: not run: the token budget is spent: 7 of 10 tokens used, and task `b` would need about 4 more
            TaskSkipped c: not run: the token budget is spent: 7 of 10 tokens used, and task `b` would need about 4 more
            RunCompleted failed: the token budget is spent: 7 of 10 tokens used, and task `b` would need about 4 more
            ",
        );
    }

    #[test]
    fn a_spent_token_budget_waits_for_what_runs_and_ends_partial() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x, depends_on: [a]}
            control_logic: {token_budget: 5}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched b#1
            > ok a#1 tokens=2+3
            TaskSucceeded a#1 tokens=2+3
            BudgetExhausted: the token budget is spent: 5 of 5 tokens used, and task `c` would need about 1 more
            > ok b#1
            TaskSucceeded b#1
            TaskSkipped c: not run: the token budget is spent: 5 of 5 tokens used, and task `c` would need about 1 more
            RunCompleted partial: the token budget is spent: 5 of 5 tokens used, and task `c` would need about 1 more
            ",
        );
    }

    /// The task's policy would fail the run once its retries ran out, but a task the budget
    /// cuts off is skipped like any other, so the run ends `partial` (as `BudgetExhausted`'s
    /// documentation says; `RunCompleted`'s says a task whose policy ends in `fail` fails it).
    #[test]
    fn a_failed_attempts_tokens_count_against_the_budget() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, backoff: 1ms}}
            control_logic: {token_budget: 5}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > fail a#1 tokens=5+0
            TaskFailed a#1 agent retryable tokens=5+0: boom
            RetryScheduled a#2 1ms
            > timer a
            RetryDue a
            BudgetExhausted: the token budget is spent: 5 of 5 tokens used, and task `a` would need about 1 more
            TaskSkipped a: not run: the token budget is spent: 5 of 5 tokens used, and task `a` would need about 1 more
            RunCompleted partial: the token budget is spent: 5 of 5 tokens used, and task `a` would need about 1 more
            ",
        );
    }

    #[test]
    fn a_phase_out_of_turns_dispatches_nothing_more() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x, on_failure: {action: retry, backoff: 1ms}}
              - {id: b, agent: m, input: x}
              - {id: c, agent: m, input: x, depends_on: [b]}
            control_logic: {max_turns_per_phase: 2}
            ",
            "
            > start
            RunCreated
            TaskDispatched b#1
            TaskDispatched a#1
            > ok b#1
            TaskSucceeded b#1
            TaskDispatched c#1
            > fail a#1
            TaskFailed a#1 agent retryable: boom
            RetryScheduled a#2 1ms
            > timer a
            RetryDue a
            BudgetExhausted: phase 1 has used all 2 of its turns (max_turns_per_phase) before task `a`
            > ok c#1
            TaskSucceeded c#1
            TaskSkipped a: not run: phase 1 has used all 2 of its turns (max_turns_per_phase) before task `a`
            RunCompleted partial: phase 1 has used all 2 of its turns (max_turns_per_phase) before task `a`
            ",
        );
    }

    #[test]
    fn an_output_is_merged_into_the_summary_when_a_task_reads_it() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: 'So far: {{ context_summary }}', depends_on: [a]}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            > ok a#1 Revenue grew.
            TaskSucceeded a#1
            ContextCompacted a summary by extractive: 2 -> 4 tokens
            TaskDispatched b#1 input=\"So far: ## a\\nRevenue grew.\"
            ",
        );
    }
}
