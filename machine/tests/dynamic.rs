//! The rules of dynamic plans as tables (the harness is `support/transcript.rs`): a task's
//! `when`, and its `for_each` expanded into item tasks `ID[INDEX]` whose outputs the map
//! collects. Each decision is an event, and a crash replays it from the log.

#[path = "support/transcript.rs"]
mod transcript;

use transcript::check;

mod conditions {
    use super::check;

    #[test]
    fn a_false_condition_skips_the_task_for_its_reason_and_the_run_still_succeeds() {
        check(
            r#"
            workflow:
              - {id: triage, agent: m, input: x}
              - {id: web, agent: m, input: x, depends_on: [triage], when: 'tasks.triage.output.kind == "web"'}
              - {id: report, agent: m, input: "web was {{ tasks.web.status }}", depends_on: [web]}
            "#,
            r#"
            > start
            RunCreated
            TaskDispatched triage#1
            > ok triage#1 {"kind": "paper"}
            TaskSucceeded triage#1
            TaskSkipped web (condition): its condition `tasks.triage.output.kind == "web"` is false
            TaskDispatched report#1 input="web was skipped"
            > ok report#1
            TaskSucceeded report#1
            RunCompleted succeeded: 2 tasks succeeded and 1 were skipped by their condition
            "#,
        );
    }

    #[test]
    fn a_true_condition_runs_the_task() {
        check(
            r#"
            workflow:
              - {id: triage, agent: m, input: x}
              - {id: web, agent: m, input: x, depends_on: [triage], when: '{{ tasks.triage.output.kind == "web" }}'}
            "#,
            r#"
            > start
            RunCreated
            TaskDispatched triage#1
            > ok triage#1 {"kind": "web"}
            TaskSucceeded triage#1
            TaskDispatched web#1
            > ok web#1
            TaskSucceeded web#1
            RunCompleted succeeded: all 2 tasks succeeded
            "#,
        );
    }

    #[test]
    fn a_condition_reads_vars_and_a_skip_for_a_failure_still_makes_the_run_partial() {
        check(
            "
            workflow:
              - {id: deep, agent: m, input: x, when: vars.deep}
              - {id: flaky, agent: m, input: x, on_failure: skip}
            ",
            "
            > start var:deep=false
            RunCreated
            TaskSkipped deep (condition): its condition `vars.deep` is false
            TaskDispatched flaky#1
            > fail flaky#1
            TaskFailed flaky#1 agent retryable: boom
            TaskSkipped flaky: failed: boom
            RunCompleted partial: 1 of 2 tasks did not succeed: flaky
            ",
        );
    }

    #[test]
    fn a_condition_that_cannot_be_evaluated_fails_the_task_with_what_it_lacked() {
        check(
            "
            workflow:
              - {id: triage, agent: m, input: x}
              - {id: web, agent: m, input: x, depends_on: [triage], when: 'tasks.triage.output.kind == 1', on_failure: retry}
            ",
            "
            > start
            RunCreated
            TaskDispatched triage#1
            > ok triage#1 not json
            TaskSucceeded triage#1
            TaskDispatched web#1 input=\"\"
            TaskFailed web#1 permanent: cannot evaluate `when: tasks.triage.output.kind == 1`: `tasks.triage.output.kind` is undefined
            RunCompleted failed: task `web` failed: cannot evaluate `when: tasks.triage.output.kind == 1`: `tasks.triage.output.kind` is undefined
            ",
        );
    }

    #[test]
    fn a_resumed_run_reads_the_skip_from_the_log() {
        check(
            "
            workflow:
              - {id: a, agent: m, input: x}
              - {id: b, agent: m, input: x, depends_on: [a], when: 'tasks.a.output == \"go\"'}
              - {id: c, agent: m, input: x}
            ",
            "
            > start
            RunCreated
            TaskDispatched a#1
            TaskDispatched c#1
            > ok a#1 stop
            TaskSucceeded a#1
            TaskSkipped b (condition): its condition `tasks.a.output == \"go\"` is false
            > crash
            > continue
            RunResumed
            TaskDispatched c#2
            > ok c#2
            TaskSucceeded c#2
            RunCompleted succeeded: 2 tasks succeeded and 1 were skipped by their condition
            ",
        );
    }
}

mod maps {
    use super::check;

    #[test]
    fn a_map_runs_one_item_per_element_and_collects_their_outputs_in_order() {
        check(
            r#"
            workflow:
              - {id: search, agent: m, input: x}
              - id: read
                agent: m
                depends_on: [search]
                for_each: tasks.search.output
                max_items: 5
                input: "read {{ item.url }} ({{ index }})"
              - {id: report, agent: m, input: "{{ tasks.read.output }}", depends_on: [read]}
            "#,
            r#"
            > start
            RunCreated
            TaskDispatched search#1
            > ok search#1 [{"url": "a"}, {"url": "b"}, {"url": "c"}]
            TaskSucceeded search#1
            MapExpanded read [{"url":"a"},{"url":"b"},{"url":"c"}]
            TaskDispatched read[0]#1 input="read a (0)"
            TaskDispatched read[1]#1 input="read b (1)"
            TaskDispatched read[2]#1 input="read c (2)"
            > ok read[1]#1 {"words": 2}
            TaskSucceeded read[1]#1
            > ok read[0]#1 plain text
            TaskSucceeded read[0]#1
            > ok read[2]#1 3
            TaskSucceeded read[2]#1
            TaskSucceeded read#0 ["plain text",{"words":2},3]
            TaskDispatched report#1 input="[\"plain text\",{\"words\":2},3]"
            > ok report#1
            TaskSucceeded report#1
            RunCompleted succeeded: all 6 tasks succeeded
            "#,
        );
    }

    #[test]
    fn a_literal_list_maps_and_an_empty_one_succeeds_with_an_empty_array() {
        check(
            r#"
            vars: {regions: []}
            workflow:
              - {id: brief, agent: m, input: "brief {{ item }}", for_each: [acme, globex]}
              - {id: none, agent: m, input: "{{ item }}", for_each: vars.regions}
            "#,
            r#"
            > start var:regions=[]
            RunCreated
            MapExpanded brief ["acme","globex"]
            TaskDispatched brief[0]#1 input="brief acme"
            TaskDispatched brief[1]#1 input="brief globex"
            MapExpanded none []
            TaskSucceeded none#0 []
            > ok brief[0]#1 A
            TaskSucceeded brief[0]#1
            > ok brief[1]#1 G
            TaskSucceeded brief[1]#1
            TaskSucceeded brief#0 ["A","G"]
            RunCompleted succeeded: all 4 tasks succeeded
            "#,
        );
    }

    #[test]
    fn a_list_longer_than_max_items_fails_the_map_with_the_count_and_the_limit() {
        check(
            "
            workflow:
              - {id: search, agent: m, input: x}
              - {id: read, agent: m, input: '{{ item }}', depends_on: [search], for_each: tasks.search.output, max_items: 2}
            ",
            "
            > start
            RunCreated
            TaskDispatched search#1
            > ok search#1 [1, 2, 3]
            TaskSucceeded search#1
            TaskDispatched read#1 input=\"\"
            TaskFailed read#1 permanent: `for_each` yielded 3 items, more than `max_items: 2`; none was run (raise `max_items` or narrow the list)
            RunCompleted failed: task `read` failed: `for_each` yielded 3 items, more than `max_items: 2`; none was run (raise `max_items` or narrow the list)
            ",
        );
    }

    #[test]
    fn a_map_over_something_that_is_not_a_list_fails_saying_what_it_got() {
        check(
            "
            workflow:
              - {id: search, agent: m, input: x}
              - {id: read, agent: m, input: '{{ item }}', depends_on: [search], for_each: tasks.search.output, max_items: 2}
            ",
            "
            > start
            RunCreated
            TaskDispatched search#1
            > ok search#1 {\"a\": 1}
            TaskSucceeded search#1
            TaskDispatched read#1 input=\"\"
            TaskFailed read#1 permanent: `for_each: tasks.search.output` yielded the JSON `{\"a\":1}`, which is not a list
            RunCompleted failed: task `read` failed: `for_each: tasks.search.output` yielded the JSON `{\"a\":1}`, which is not a list
            ",
        );
    }

    #[test]
    fn each_item_follows_the_policy_and_a_skipped_item_is_null() {
        check(
            "
            workflow:
              - {id: read, agent: m, input: '{{ item }}', for_each: [a, b], on_failure: skip}
            ",
            "
            > start
            RunCreated
            MapExpanded read [\"a\",\"b\"]
            TaskDispatched read[0]#1 input=\"a\"
            TaskDispatched read[1]#1 input=\"b\"
            > fail read[0]#1
            TaskFailed read[0]#1 agent retryable: boom
            TaskSkipped read[0]: failed: boom
            > ok read[1]#1 B
            TaskSucceeded read[1]#1
            TaskSucceeded read#0 [null,\"B\"]
            RunCompleted partial: 1 of 3 tasks did not succeed: read[0]
            ",
        );
    }

    #[test]
    fn a_condition_that_reads_item_is_each_items() {
        check(
            "
            workflow:
              - {id: read, agent: m, input: '{{ item.n }}', for_each: [{n: 1}, {n: 5}], when: item.n > 2}
            ",
            "
            > start
            RunCreated
            MapExpanded read [{\"n\":1},{\"n\":5}]
            TaskSkipped read[0] (condition): its condition `item.n > 2` is false
            TaskDispatched read[1]#1 input=\"5\"
            > ok read[1]#1 five
            TaskSucceeded read[1]#1
            TaskSucceeded read#0 [null,\"five\"]
            RunCompleted succeeded: 2 tasks succeeded and 1 were skipped by their condition
            ",
        );
    }

    #[test]
    fn a_map_whose_condition_is_false_is_skipped_whole() {
        check(
            "
            workflow:
              - {id: read, agent: m, input: '{{ item }}', for_each: [a, b], when: vars.deep}
            ",
            "
            > start var:deep=false
            RunCreated
            TaskSkipped read (condition): its condition `vars.deep` is false
            RunCompleted succeeded: 0 tasks succeeded and 1 were skipped by their condition
            ",
        );
    }

    #[test]
    fn items_keep_to_max_concurrency_and_the_sequential_order() {
        check(
            "
            workflow:
              - {id: read, agent: m, input: '{{ item }}', for_each: [a, b, c]}
            control_logic: {max_concurrency: 2}
            ",
            "
            > start
            RunCreated
            MapExpanded read [\"a\",\"b\",\"c\"]
            TaskDispatched read[0]#1 input=\"a\"
            TaskDispatched read[1]#1 input=\"b\"
            > ok read[0]#1
            TaskSucceeded read[0]#1
            TaskDispatched read[2]#1 input=\"c\"
            > ok read[1]#1
            TaskSucceeded read[1]#1
            > ok read[2]#1
            TaskSucceeded read[2]#1
            TaskSucceeded read#0 [\"ok\",\"ok\",\"ok\"]
            RunCompleted succeeded: all 4 tasks succeeded
            ",
        );
        check(
            "
            workflow:
              - {id: first, agent: m, input: x}
              - {id: read, agent: m, input: '{{ item }}', for_each: [a, b], depends_on: [first]}
            ",
            "
            > start sequential
            RunCreated
            TaskDispatched first#1
            > ok first#1
            TaskSucceeded first#1
            MapExpanded read [\"a\",\"b\"]
            TaskDispatched read[0]#1 input=\"a\"
            > ok read[0]#1
            TaskSucceeded read[0]#1
            TaskDispatched read[1]#1 input=\"b\"
            > ok read[1]#1
            TaskSucceeded read[1]#1
            TaskSucceeded read#0 [\"ok\",\"ok\"]
            RunCompleted succeeded: all 4 tasks succeeded
            ",
        );
    }

    #[test]
    fn under_phased_the_items_are_a_phase_before_the_map() {
        check(
            "
            workflow:
              - {id: read, agent: m, input: '{{ item }}', for_each: [a, b], parallel_group: g}
              - {id: after, agent: m, input: x, depends_on: [read]}
            control_logic: {parallel_groups: {g: {max_concurrency: 2}}}
            ",
            "
            > start phased
            RunCreated
            MapExpanded read [\"a\",\"b\"]
            TaskDispatched read[0]#1 input=\"a\"
            TaskDispatched read[1]#1 input=\"b\"
            > ok read[0]#1
            TaskSucceeded read[0]#1
            > ok read[1]#1
            TaskSucceeded read[1]#1
            TaskSucceeded read#0 [\"ok\",\"ok\"]
            TaskDispatched after#1
            > ok after#1
            TaskSucceeded after#1
            RunCompleted succeeded: all 4 tasks succeeded
            ",
        );
    }

    #[test]
    fn a_crash_mid_map_reruns_only_the_items_that_had_not_succeeded() {
        check(
            "
            workflow:
              - {id: read, agent: m, input: '{{ item }}', for_each: [a, b, c]}
            ",
            "
            > start
            RunCreated
            MapExpanded read [\"a\",\"b\",\"c\"]
            TaskDispatched read[0]#1 input=\"a\"
            TaskDispatched read[1]#1 input=\"b\"
            TaskDispatched read[2]#1 input=\"c\"
            > ok read[1]#1 B
            TaskSucceeded read[1]#1
            > crash
            > continue
            RunResumed
            TaskDispatched read[0]#2 input=\"a\"
            TaskDispatched read[2]#2 input=\"c\"
            > ok read[0]#2 A
            TaskSucceeded read[0]#2
            > ok read[2]#2 C
            TaskSucceeded read[2]#2
            TaskSucceeded read#0 [\"A\",\"B\",\"C\"]
            RunCompleted succeeded: all 4 tasks succeeded
            ",
        );
    }

    #[test]
    fn a_retried_run_takes_over_the_items_it_reuses_once_the_map_expands() {
        check(
            "
            workflow:
              - {id: read, agent: m, input: '{{ item }}', for_each: [a, b, c]}
            ",
            "
            > start reuse read[0]=A read[2]=C
            RunCreated
            TaskReused read[0] \"A\"
            TaskReused read[2] \"C\"
            MapExpanded read [\"a\",\"b\",\"c\"]
            TaskDispatched read[1]#1 input=\"b\"
            > ok read[1]#1 B
            TaskSucceeded read[1]#1
            TaskSucceeded read#0 [\"A\",\"B\",\"C\"]
            RunCompleted succeeded: all 4 tasks succeeded
            ",
        );
    }
}
