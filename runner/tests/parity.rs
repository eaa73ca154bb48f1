//! Parity: a plan test says what `runner apply` does. Each case is one plan run two ways:
//! `runner test --keep` with every reply scripted in the scenario's overrides, and `runner
//! apply` with the same replies given by the plan's own `mock` agents (and, for tools, an llm
//! agent on a scripted OpenAI-compatible server), a person's answers and decisions given with
//! `runner answer|approve|reject` and `runner resume`. The two logs must hold the same events
//! (types, tasks, attempts, inputs, outputs, statuses, reasons and their order), apart from
//! what only a wall clock or a model's server decides: stamps, durations, a retry's random
//! jitter and tool call ids.
//!
//! A feature a plan test cannot express the way a run does fails here; the cases cover every
//! feature docs/testing.md lists. Tasks that retry are chained rather than parallel: a live
//! run draws its retry jitter at random, so two retries due at about the same time may come
//! in either order there. Where a latency decides an order, it is long (2 s) beside the
//! instant replies of mock agents, so that a slow disk's fsync cannot reorder a live run.

mod shipped;

use std::path::Path;

use serde_json::Value;
use shipped::runner;

/// One scripted agent: its name, latency and replies by the task id its runtime sees
/// (`TASK`, or `TASK.review` / `TASK.replan` for a reviewer's or planner's attempts). Each
/// reply is a flow-YAML value read alike by a mock agent's `responses` and a scenario's
/// `replies`: a text, or `{output|fail|transient|clarify: TEXT, tokens: {...}}`.
struct Agent {
    name: &'static str,
    latency: Option<&'static str>,
    replies: &'static [(&'static str, &'static [&'static str])],
}

/// One parity case: the plan's parts and a person's answers and decisions.
struct Case<'a> {
    name: &'static str,
    /// Lines of `spec` other than the agents (workflow, control_logic, tools...), indented
    /// two spaces.
    spec: &'a str,
    agents: &'a [Agent],
    /// Answers to questions: task, text.
    answers: &'a [(&'a str, &'a str)],
    /// Review and tool-call decisions: task, approved, comment.
    reviews: &'a [(&'a str, bool, &'a str)],
}

impl Case<'_> {
    /// The plan both ways run: the agents are `mock` agents with their replies as responses.
    fn plan(&self, extra_agents: &str) -> String {
        let mut agents = String::new();
        for agent in self.agents {
            agents.push_str(&format!("    {}:\n      runtime: mock\n", agent.name));
            if let Some(latency) = agent.latency {
                agents.push_str(&format!("      latency: {latency}\n"));
            }
            if !agent.replies.is_empty() {
                agents.push_str("      responses:\n");
                for (task, replies) in agent.replies {
                    agents.push_str(&format!("        {task}: [{}]\n", replies.join(", ")));
                }
            }
        }
        format!(
            "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: {}}}\nspec:\n  agent_definitions:\n{agents}{extra_agents}{}",
            self.name, self.spec
        )
    }

    /// The scenario: the same replies as overrides (by task; a reviewer's and a planner's by
    /// agent), with the latency of each, `live`'s scripts, and the answers and decisions.
    fn scenario(&self, live: &Live<'_>) -> String {
        let (mut tasks, mut agents) = (String::new(), String::new());
        for (task, reply) in live.scripts {
            tasks.push_str(&format!("      {task}: {{replies: [{reply}]}}\n"));
        }
        for agent in self.agents {
            let latency = agent.latency.map(|l| format!(", latency: {l}")).unwrap_or_default();
            for (task, replies) in agent.replies {
                let script = format!("{{replies: [{}]{latency}}}", replies.join(", "));
                if task.contains('.') {
                    agents.push_str(&format!("      {}: {script}\n", agent.name));
                } else {
                    tasks.push_str(&format!("      {task}: {script}\n"));
                }
            }
        }
        let mut scenario = format!(
            "apiVersion: runner/v1\nkind: PlanTest\nmetadata: {{name: {}}}\nspec:\n  plan: plan.yaml\n",
            self.name
        );
        let mut section = |head: &str, body: &str| {
            if !body.is_empty() {
                scenario.push_str(head);
                scenario.push_str(body);
            }
        };
        let overrides = [("    agents:\n", agents), ("    tasks:\n", tasks)]
            .iter()
            .filter(|(_, body)| !body.is_empty())
            .map(|(head, body)| format!("{head}{body}"))
            .collect::<String>()
            + live.tools;
        section("  overrides:\n", &overrides);
        let answers: String = self.answers.iter().map(|(task, text)| format!("    {task}: {text:?}\n")).collect();
        section("  answers:\n", &answers);
        let reviews: String = self
            .reviews
            .iter()
            .map(|(task, approve, comment)| format!("    {task}: {{approve: {approve}, comment: {comment:?}}}\n"))
            .collect();
        section("  reviews:\n", &reviews);
        scenario
    }
}

/// What a case runs live besides its mock agents: llm agents for the plan (on `server`),
/// with the scripts and tool results that stand for them under `runner test`.
#[derive(Default)]
struct Live<'a> {
    /// More entries of `agent_definitions`, indented four spaces.
    agents: &'a str,
    /// The scenario's replies for the tasks of those agents: task, reply.
    scripts: &'a [(&'a str, &'a str)],
    /// The scenario's `overrides.tools`, indented four spaces.
    tools: &'a str,
    /// The server the llm agents ask.
    server: Option<&'a testkit::FakeOpenAi>,
    /// More files beside the plan (its sub-plans): name and text.
    files: &'a [(&'a str, &'a str)],
}

/// Runs `runner ARGS` in `dir` with RUNNER_HOME `home` and no terminal; the exit code and
/// what it printed.
fn run_in(dir: &Path, home: &Path, args: &[&str]) -> (i32, String) {
    let output =
        runner().current_dir(dir).env("RUNNER_HOME", home).args(args).write_stdin("").output().expect("runner runs");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.code().expect("an exit code"), text)
}

/// The records of the one run kept under `home` and of its child runs, as JSON values, by
/// the part of their id after the run's (`""` for the run, `.sub` for a child).
fn runs(home: &Path) -> Vec<(String, Vec<Value>)> {
    let mut runs: Vec<(String, Vec<Value>)> = std::fs::read_dir(home.join("runs"))
        .expect("a run was kept")
        .flatten()
        .map(|entry| {
            let log = std::fs::read_to_string(entry.path().join("events.jsonl")).expect("the run's log");
            let records = log.lines().map(|line| serde_json::from_str(line).expect("a JSON record")).collect();
            (entry.file_name().to_string_lossy().into_owned(), records)
        })
        .collect();
    let tops: Vec<String> = runs
        .iter()
        .filter(|(_, records)| records.first().is_some_and(|created| created.get("parent").is_none()))
        .map(|(name, _)| name.clone())
        .collect();
    assert_eq!(tops.len(), 1, "one run under {}, besides its children: {tops:?}", home.display());
    runs.sort_by(|a, b| a.0.cmp(&b.0));
    runs.into_iter()
        .map(|(name, records)| {
            let suffix =
                name.strip_prefix(&tops[0]).unwrap_or_else(|| panic!("`{name}` is not a child of `{}`", tops[0]));
            (suffix.to_owned(), records)
        })
        .collect()
}

/// The records of the run kept under `home` (not of its children).
fn records(home: &Path) -> Vec<Value> {
    runs(home).into_iter().find(|(suffix, _)| suffix.is_empty()).map(|(_, records)| records).unwrap_or_default()
}

/// Whether the last record ends the run.
fn ended(home: &Path) -> bool {
    records(home).last().is_some_and(|r| r["type"] == "RunCompleted" || r["type"] == "RunCancelled")
}

/// A record without what only the wall clock decides: its stamp and run id (and a child's
/// parent run's id, which `--keep` names), how long an attempt took, a retry's jittered delay
/// (a plan test draws jitter from a fixed seed), and the line's checksum, which sums them; and
/// without the forecast `apply` records in `RunCreated` (what the run is scored against, which
/// a plan test, a run of its own making, has no use for).
fn comparable(mut record: Value) -> Value {
    if let Some(fields) = record.as_object_mut() {
        for field in ["at", "run_id", "duration_ms", "delay_ms", "jitter", "crc", "forecast"] {
            fields.remove(field);
        }
        if let Some(Value::Object(parent)) = fields.get_mut("parent") {
            parent.remove("run");
        }
    }
    record
}

/// The records with each tool call's id, which the model's server chooses, replaced by the
/// order of its first mention.
fn numbered_calls(records: Vec<Value>) -> Vec<Value> {
    let mut ids: Vec<String> = Vec::new();
    let mut number = |id: &mut Value| {
        let Some(text) = id.as_str() else { return };
        let n = ids.iter().position(|known| known == text).unwrap_or_else(|| {
            ids.push(text.to_owned());
            ids.len() - 1
        });
        *id = Value::from(format!("call-{n}"));
    };
    records
        .into_iter()
        .map(|mut record| {
            if let Some(id) = record.get_mut("call_id") {
                number(id);
            }
            if let Some(Value::Array(calls)) = record.get_mut("tool_calls") {
                calls.iter_mut().filter_map(|call| call.get_mut("id")).for_each(&mut number);
            }
            record
        })
        .collect()
}

/// Runs `case` both ways in a fresh folder and asserts the same events; returns them.
fn assert_parity(case: &Case) -> Vec<Value> {
    assert_parity_with(case, &Live::default())
}

/// [`assert_parity`] with llm agents that run live on a server.
fn assert_parity_with(case: &Case, live: &Live<'_>) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let plan = case.plan(live.agents);
    let scenario = case.scenario(live);
    std::fs::write(dir.path().join("plan.yaml"), &plan).expect("writes the plan");
    std::fs::write(dir.path().join("plan.test.yaml"), &scenario).expect("writes the scenario");
    for (name, text) in live.files {
        std::fs::write(dir.path().join(name), text).expect("writes a sub-plan");
    }

    let tested = tempfile::tempdir().expect("a temp dir");
    let (code, report) = run_in(dir.path(), tested.path(), &["test", "plan.test.yaml", "--keep"]);
    assert!(code == 0, "{}: `runner test` did not run the scenario:\n{report}\n{scenario}", case.name);
    let from_test = comparable_runs(tested.path());

    let applied = tempfile::tempdir().expect("a temp dir");
    run_in(dir.path(), applied.path(), &["apply", "plan.yaml", "--yes", "--run-id", "parity"]);
    let mut decisions: Vec<Vec<String>> = Vec::new();
    for (task, text) in case.answers {
        decisions.push(vec!["answer".into(), (*task).into(), (*text).into()]);
    }
    for (task, approve, comment) in case.reviews {
        let verb = if *approve { "approve" } else { "reject" };
        decisions.push(vec![verb.into(), (*task).into(), "--comment".into(), (*comment).into()]);
    }
    // As a person would: answer what the paused run waits for, then resume, until it ends or
    // waits for something nobody answers.
    while !ended(applied.path()) {
        let before = decisions.len();
        decisions.retain(|decision| {
            let mut args = vec![decision[0].as_str(), "parity"];
            args.extend(decision[1..].iter().map(String::as_str));
            run_in(dir.path(), applied.path(), &args).0 != 0
        });
        if decisions.len() == before || ended(applied.path()) {
            break;
        }
        run_in(dir.path(), applied.path(), &["resume", "parity"]);
    }
    let from_apply = comparable_runs(applied.path());
    if let Some(server) = live.server {
        assert!(!server.requests().is_empty(), "{}: the llm agent was asked", case.name);
    }
    let (children_tested, children_applied) = (names(&from_test), names(&from_apply));
    assert_eq!(children_tested, children_applied, "{}: the child runs differ", case.name);
    for ((child, from_test), (_, from_apply)) in from_test.iter().zip(&from_apply).filter(|((c, _), _)| !c.is_empty()) {
        assert!(
            from_test == from_apply,
            "{}: the child run `{child}` differs\nrunner test:\n{}\nrunner apply:\n{}",
            case.name,
            lines(from_test),
            lines(from_apply)
        );
    }
    let from_test = from_test.into_iter().find(|(c, _)| c.is_empty()).map(|(_, r)| r).unwrap_or_default();
    let from_apply = from_apply.into_iter().find(|(c, _)| c.is_empty()).map(|(_, r)| r).unwrap_or_default();
    let first =
        from_test.iter().zip(&from_apply).position(|(a, b)| a != b).unwrap_or(from_test.len().min(from_apply.len()));
    let around = |records: &[Value]| {
        let from = first.saturating_sub(2);
        records.iter().skip(from).take(5).map(Value::to_string).collect::<Vec<_>>().join("\n")
    };
    assert!(
        from_test == from_apply,
        "{}: `runner test` and `runner apply` differ at record {} ({} and {} records)\n\
         runner test:\n{}\nrunner apply:\n{}\nthe plan:\n{plan}\nthe scenario:\n{}",
        case.name,
        first + 1,
        from_test.len(),
        from_apply.len(),
        around(&from_test),
        around(&from_apply),
        scenario
    );
    from_test
}

/// The kept runs under `home` as [`runs`] gives them, each record [`comparable`] and each tool
/// call numbered.
fn comparable_runs(home: &Path) -> Vec<(String, Vec<Value>)> {
    runs(home)
        .into_iter()
        .map(|(suffix, records)| (suffix, numbered_calls(records.into_iter().map(comparable).collect())))
        .collect()
}

/// The ids of runs, as [`runs`] gives them.
fn names(runs: &[(String, Vec<Value>)]) -> Vec<&str> {
    runs.iter().map(|(suffix, _)| suffix.as_str()).collect()
}

/// Records one a line.
fn lines(records: &[Value]) -> String {
    records.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")
}

/// The `type` of each record.
fn types(records: &[Value]) -> Vec<&str> {
    records.iter().map(|r| r["type"].as_str().expect("a type")).collect()
}

/// The run's outcome, from its last record.
fn outcome(records: &[Value]) -> &str {
    records.last().filter(|r| r["type"] == "RunCompleted").and_then(|r| r["status"].as_str()).expect("the run ended")
}

#[test]
fn retries_failure_classes_and_skips() {
    let records = assert_parity(&Case {
        name: "retries",
        spec: "  workflow:
    - {id: flaky, agent: worker, input: A., on_failure: {action: retry, max_attempts: 3, backoff: 10ms}}
    - {id: service, agent: worker, input: B., depends_on: [flaky], on_failure: {action: retry, max_attempts: 2, backoff: 10ms, retry_on: transient}}
    - {id: broken, agent: worker, input: C., depends_on: [service], on_failure: {action: retry, max_attempts: 3, backoff: 10ms, retry_on: transient, then: skip}}
    - {id: after, agent: worker, input: 'after {{ tasks.broken.status }}', depends_on: [broken]}
",
        agents: &[Agent {
            name: "worker",
            latency: None,
            replies: &[
                ("flaky", &["{fail: boom}", "{fail: boom again}", "fixed"]),
                ("service", &["{transient: HTTP 503}", "served"]),
                ("broken", &["{fail: not the service}"]),
            ],
        }],
        answers: &[],
        reviews: &[],
    });
    assert_eq!(outcome(&records), "partial");
    assert_eq!(types(&records).iter().filter(|t| **t == "RetryScheduled").count(), 3);
}

#[test]
fn a_critical_failure_fails_the_run() {
    let records = assert_parity(&Case {
        name: "critical",
        spec: "  workflow:
    - {id: vital, agent: worker, input: A., critical: true, on_failure: {action: retry, max_attempts: 2, backoff: 10ms}}
    - {id: other, agent: worker, input: B.}
",
        agents: &[Agent { name: "worker", latency: None, replies: &[("vital", &["{fail: gone}"])] }],
        answers: &[],
        reviews: &[],
    });
    assert_eq!(outcome(&records), "failed");
}

#[test]
fn strategies_and_limits_with_latencies() {
    for strategy in ["eager", "phased", "sequential"] {
        let spec = format!(
            "  control_logic: {{strategy: {strategy}, max_concurrency: 2, parallel_groups: {{g: {{max_concurrency: 1}}}}}}
  workflow:
    - {{id: a, agent: quick, input: A., parallel_group: g}}
    - {{id: b, agent: slow, input: B.}}
    - {{id: c, agent: quick, input: 'C after {{{{ tasks.a.output }}}}', depends_on: [a]}}
    - {{id: d, agent: quick, input: D., parallel_group: g}}
    - {{id: e, agent: quick, input: E., depends_on: [b, c]}}
"
        );
        let records = assert_parity(&Case {
            name: "strategies",
            spec: &spec,
            agents: &[
                Agent { name: "quick", latency: None, replies: &[] },
                Agent { name: "slow", latency: Some("2s"), replies: &[] },
            ],
            answers: &[],
            reviews: &[],
        });
        assert_eq!(outcome(&records), "succeeded", "{strategy}");
    }
}

#[test]
fn a_timeout_fails_the_attempt_and_the_retry_succeeds() {
    let records = assert_parity(&Case {
        name: "timeouts",
        spec: "  workflow:
    - {id: slow, agent: sleepy, input: A., timeout: 200ms, on_failure: {action: retry, max_attempts: 2, backoff: 10ms}}
    - {id: quick, agent: worker, input: 'B {{ tasks.slow.output }}', depends_on: [slow]}
",
        agents: &[
            Agent { name: "sleepy", latency: Some("2s"), replies: &[] },
            Agent { name: "worker", latency: None, replies: &[] },
        ],
        answers: &[],
        reviews: &[],
    });
    assert_eq!(outcome(&records), "failed", "both attempts of a 2s agent time out at 200ms");
    assert!(records.iter().any(|r| r["type"] == "TaskFailed" && r["class"] == "timeout"), "{records:?}");
}

#[test]
fn questions_are_answered_and_the_task_goes_on() {
    let records = assert_parity(&Case {
        name: "questions",
        spec: "  workflow:
    - {id: pick, agent: worker, input: Write the report.}
    - {id: after, agent: worker, input: 'Check {{ tasks.pick.output }}', depends_on: [pick]}
",
        agents: &[Agent {
            name: "worker",
            latency: None,
            replies: &[("pick", &["{clarify: Which year?}", "the 2025 report"])],
        }],
        answers: &[("pick", "2025")],
        reviews: &[],
    });
    assert_eq!(outcome(&records), "succeeded");
    assert!(types(&records).contains(&"ClarificationRequested"), "{records:?}");
}

const REVIEWED: &str = "  workflow:
    - {id: draft, agent: worker, input: Write.}
    - {id: approve_it, type: human_review, depends_on: [draft], prompt: 'Publish? {{ tasks.draft.output }}'}
    - {id: publish, agent: worker, input: 'Publish {{ tasks.approve_it.output }}', depends_on: [approve_it]}
";

#[test]
fn reviews_approved_and_rejected() {
    let approved = assert_parity(&Case {
        name: "approved",
        spec: REVIEWED,
        agents: &[Agent { name: "worker", latency: None, replies: &[] }],
        answers: &[],
        reviews: &[("approve_it", true, "fine")],
    });
    assert_eq!(outcome(&approved), "succeeded");
    let rejected = assert_parity(&Case {
        name: "rejected",
        spec: REVIEWED,
        agents: &[Agent { name: "worker", latency: None, replies: &[] }],
        answers: &[],
        reviews: &[("approve_it", false, "no")],
    });
    assert_eq!(outcome(&rejected), "failed");
    let skipped = assert_parity(&Case {
        name: "rejected-skips",
        spec: &REVIEWED.replace("prompt: 'Publish?", "on_failure: skip, prompt: 'Publish?"),
        agents: &[Agent { name: "worker", latency: None, replies: &[] }],
        answers: &[],
        reviews: &[("approve_it", false, "no")],
    });
    assert_eq!(outcome(&skipped), "partial");
}

#[test]
fn a_failed_task_is_replanned() {
    let records = assert_parity(&Case {
        name: "replans",
        spec: "  control_logic: {planner: planner, max_replans: 1}
  workflow:
    - {id: search, agent: worker, input: Search., on_failure: replan}
    - {id: brief, agent: worker, input: 'Brief from {{ tasks.search.output }}', depends_on: [search]}
",
        agents: &[
            Agent { name: "worker", latency: None, replies: &[("search", &["{fail: no hits}"])] },
            Agent {
                name: "planner",
                latency: None,
                replies: &[(
                    "search.replan",
                    &[r#"'{"workflow": [{"id": "lookup", "agent": "worker", "input": "Look it up."}]}'"#],
                )],
            },
        ],
        answers: &[],
        reviews: &[],
    });
    assert!(types(&records).contains(&"Replanned"), "{records:?}");
}

#[test]
fn a_gate_condenses_its_inputs() {
    let records = assert_parity(&Case {
        name: "gates",
        spec: "  workflow:
    - {id: one, agent: worker, input: One.}
    - {id: two, agent: worker, input: Two.}
    - {id: digest, type: synthesis_gate, inputs: [one, two], max_output_tokens: 50}
    - {id: report, agent: worker, input: 'Report {{ tasks.digest.output }}', depends_on: [digest]}
",
        agents: &[Agent {
            name: "worker",
            latency: None,
            replies: &[("one", &["first findings, in some detail"]), ("two", &["second findings"])],
        }],
        answers: &[],
        reviews: &[],
    });
    assert_eq!(outcome(&records), "succeeded");
}

#[test]
fn schema_command_and_reviewer_verifications() {
    let records = assert_parity(&Case {
        name: "verifications",
        spec: "  workflow:
    - id: shaped
      agent: worker
      input: A.
      verification: {type: schema_check, schema: {type: object, required: [hits]}}
      on_failure: {action: retry, max_attempts: 2, backoff: 10ms}
    - id: checked
      agent: worker
      input: B.
      depends_on: [shaped]
      verification: {type: command, command: [grep, -q, good]}
      on_failure: {action: retry, max_attempts: 2, backoff: 10ms}
    - id: judged
      agent: worker
      input: C.
      depends_on: [checked]
      verification: {type: llm_reviewer, agent: judge}
      on_failure: {action: retry, max_attempts: 3, backoff: 10ms}
",
        agents: &[
            Agent {
                name: "worker",
                latency: None,
                replies: &[
                    ("shaped", &["'{\"count\": 0}'", "'{\"hits\": []}'"]),
                    ("checked", &["bad", "good"]),
                    ("judged", &["first", "second", "third"]),
                ],
            },
            Agent {
                name: "judge",
                latency: None,
                replies: &[(
                    "judged.review",
                    &[
                        r#"'{"pass": false, "reason": "too short"}'"#,
                        r#"'{"pass": false, "reason": "still short"}'"#,
                        r#"'{"pass": true, "reason": "fine"}'"#,
                    ],
                )],
            },
        ],
        answers: &[],
        reviews: &[],
    });
    assert_eq!(outcome(&records), "succeeded");
    assert_eq!(types(&records).iter().filter(|t| **t == "VerificationFailed").count(), 4, "{records:?}");
}

#[test]
fn token_budgets_count_stated_usage() {
    let records = assert_parity(&Case {
        name: "budgets",
        spec: "  control_logic: {token_budget: 1000}
  workflow:
    - {id: first, agent: worker, input: One.}
    - {id: second, agent: worker, input: Two., depends_on: [first]}
",
        agents: &[Agent {
            name: "worker",
            latency: None,
            replies: &[("first", &["{output: done, tokens: {prompt: 700, completion: 400}}"])],
        }],
        answers: &[],
        reviews: &[],
    });
    assert!(types(&records).contains(&"BudgetExhausted"), "{records:?}");
    let succeeded = records.iter().find(|r| r["type"] == "TaskSucceeded").expect("first succeeded");
    assert_eq!(succeeded["tokens"], serde_json::json!({"prompt": 700, "completion": 400}));
}

#[test]
fn tool_calls_approved_and_rejected_on_a_real_llm_runtime() {
    for (approve, output) in
        [(true, "deleted build/old"), (false, "error: a person rejected this call of `delete_folder`: keep it")]
    {
        // Live, the llm agent asks an OpenAI-compatible server that calls the tool, then answers
        // with what the call came to (its result, or the rejection); under `runner test` a
        // scripted tool call does the same.
        let server = testkit::FakeOpenAi::start(|body, n| match n {
            0 => testkit::Step::ToolCalls(vec![("delete_folder".to_owned(), r#"{"path":"build/old"}"#.to_owned())]),
            _ => {
                let messages = body["messages"].as_array().cloned().unwrap_or_default();
                let last = messages.last().and_then(|m| m["content"].as_str()).unwrap_or_default().to_owned();
                testkit::Step::Answer(last)
            }
        });
        let usage = format!("{{prompt: {}, completion: {}}}", testkit::PROMPT_TOKENS, testkit::COMPLETION_TOKENS);
        let reply = format!("{{tool: delete_folder, arguments: {{path: build/old}}, tokens: {usage}}}");
        let spec = format!(
            "  providers:
    fake: {{base_url: '{}', model: m}}
  tools:
    delete_folder:
      description: Delete a folder
      command: [printf, deleted build/old]
      destructive: true
  workflow:
    - {{id: clean, agent: janitor, input: Clean up.}}
    - {{id: report, agent: worker, input: 'Report {{{{ tasks.clean.output }}}}', depends_on: [clean]}}
",
            server.base_url()
        );
        let reviews = [("clean", approve, if approve { "it can go" } else { "keep it" })];
        let case = Case {
            name: "tools",
            spec: &spec,
            agents: &[Agent { name: "worker", latency: None, replies: &[] }],
            answers: &[],
            reviews: &reviews,
        };
        let live = Live {
            agents: "    janitor: {runtime: llm, provider: fake, tools: [delete_folder], max_turns: 3}\n",
            scripts: &[("clean", &reply)],
            tools: "    tools:\n      delete_folder: {result: deleted build/old}\n",
            server: Some(&server),
            files: &[],
        };
        let records = assert_parity_with(&case, &live);
        let kinds = types(&records);
        for kind in ["ToolApprovalRequested", "ToolApprovalDecided"] {
            assert!(kinds.contains(&kind), "{kind} missing: {kinds:?}");
        }
        assert_eq!(kinds.contains(&"ToolCallStarted"), approve, "{kinds:?}");
        let clean = records.iter().find(|r| r["type"] == "TaskSucceeded" && r["task"] == "clean").expect("clean ends");
        assert_eq!(clean["output"], output);
    }
}

/// The sub-plan of [`sub_plans_and_expand`]: a draft, a person's review, and a final step.
const CHILD: &str = include_str!("fixtures/subplans/reviewed.yaml");

#[test]
fn sub_plans_and_expand() {
    // The case is named `parity` as the applied run is: a child run's id, and the question its
    // parent's task asks for it, hold the parent run's id.
    let case = Case {
        name: "parity",
        spec: "  workflow:
    - {id: first, agent: worker, input: hello}
    - {id: sub, type: plan, plan: child.yaml, depends_on: [first], with: {topic: '{{ tasks.first.output }}'}}
    - {id: grow, type: expand, agent: planner, depends_on: [sub], input: 'Go on from {{ tasks.sub.output }}'}
    - {id: last, agent: worker, depends_on: [grow], input: 'got {{ tasks.grow.output }}'}
",
        agents: &[
            Agent { name: "worker", latency: None, replies: &[] },
            Agent {
                name: "planner",
                latency: None,
                replies: &[(
                    "grow",
                    &[
                        "not a plan",
                        r#"'{"workflow": [{"id": "step", "agent": "worker", "input": "Step."}, {"id": "wrap", "agent": "worker", "input": "Wrap {{ tasks.step.output }}", "depends_on": ["step"]}]}'"#,
                    ],
                )],
            },
        ],
        answers: &[],
        reviews: &[("sub/check", true, "fine")],
    };
    let live = Live { files: &[("child.yaml", CHILD)], ..Live::default() };
    let records = assert_parity_with(&case, &live);
    assert_eq!(outcome(&records), "succeeded");
    let last = records.iter().rfind(|r| r["type"] == "TaskSucceeded" && r["task"] == "last").expect("last ends");
    assert_eq!(last["output"], "got Wrap Step.");
    // The child's review paused the parent's task, and the approval reached the child.
    let asked = records.iter().find(|r| r["type"] == "ClarificationRequested").expect("the parent's task asked");
    assert_eq!(asked["task"], "sub");
    assert!(asked["question"].as_str().is_some_and(|q| q.contains("runner approve parity sub/check")), "{asked}");
}
