//! Compacting error messages before they are stored: the error line and source locations
//! kept, stack traces folded, repeats collapsed.

use super::extract::{Measure, fit, word_prefix};
use super::units;

/// Compacts `error` to at most `char_limit` chars (not bytes): unchanged if it fits;
/// otherwise stack traces are folded and repeated lines collapsed, and if that is not
/// enough the first line, `path:line` lines and error lines are kept before others.
/// Never cuts inside a word or a char.
pub fn compact_error(error: &str, char_limit: usize) -> String {
    if error.chars().count() <= char_limit {
        return error.to_owned();
    }
    let lines: Vec<&str> = error.lines().map(str::trim_end).collect();
    let lines = collapse_repeats(fold_frames(&lines));
    let mut text = lines.join("\n");
    if text.chars().count() <= char_limit {
        return text;
    }
    // A first line longer than half the limit is cut so that locations still fit beside it.
    let first = text.trim_start().lines().next().unwrap_or("");
    let half = char_limit / 2;
    if first.chars().count() > half {
        let cut = word_prefix(first, half.saturating_sub(1), Measure::Chars);
        if !cut.is_empty() {
            let rest = &text.trim_start()[first.len()..];
            text = format!("{cut}…{rest}");
        }
    }
    let units = units::split(&text, false);
    fit(&text, &units, char_limit, Measure::Chars, true).text
}

/// Which kind of stack frame a line starts, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// `  at f (x.js:1:2)`, also Java and .NET.
    At,
    /// `  File "x.py", line 3, in f`, followed by the source line.
    Python,
    /// `   4: symbol`, followed by `at path:line:col`.
    Rust,
}

fn frame_kind(line: &str) -> Option<Frame> {
    let body = line.trim_start();
    if body.len() == line.len() {
        return None;
    }
    if body.starts_with("at ") {
        Some(Frame::At)
    } else if body.starts_with("File \"") && body.contains("\", line ") {
        Some(Frame::Python)
    } else {
        let digits = body.bytes().take_while(u8::is_ascii_digit).count();
        (digits > 0 && body[digits..].starts_with(": ")).then_some(Frame::Rust)
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Folds every run of four or more stack frames to its first two and last frame, with
/// `[… N frames folded]` in between.
fn fold_frames(lines: &[&str]) -> Vec<String> {
    let mut out = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        // The frames of the run starting here, as line ranges.
        let mut frames: Vec<(usize, usize)> = Vec::new();
        let mut j = i;
        while let Some(kind) = lines.get(j).and_then(|l| frame_kind(l)) {
            let own = indent(lines[j]);
            let mut end = j + 1;
            while let Some(next) = lines.get(end) {
                let continues = match kind {
                    Frame::Python => {
                        !next.trim().is_empty() && indent(next) > own && frame_kind(next) != Some(Frame::Python)
                    }
                    Frame::Rust => indent(next) > own && next.trim_start().starts_with("at "),
                    Frame::At => false,
                };
                if !continues {
                    break;
                }
                end += 1;
            }
            frames.push((j, end));
            j = end;
        }
        if frames.len() >= 4 {
            let push =
                |out: &mut Vec<String>, (s, e): (usize, usize)| out.extend(lines[s..e].iter().map(|l| (*l).to_owned()));
            push(&mut out, frames[0]);
            push(&mut out, frames[1]);
            let pad = " ".repeat(indent(lines[frames[0].0]));
            out.push(format!("{pad}[… {} frames folded]", frames.len() - 3));
            push(&mut out, frames[frames.len() - 1]);
            i = j;
        } else if j > i {
            out.extend(lines[i..j].iter().map(|l| (*l).to_owned()));
            i = j;
        } else {
            out.push(lines[i].to_owned());
            i += 1;
        }
    }
    out
}

/// Collapses each run of identical lines to one line plus `[previous line repeated N times]`,
/// and each run of lines differing only in their digits to the first plus
/// `[similar line repeated N times]`.
fn collapse_repeats(lines: Vec<String>) -> Vec<String> {
    fn shape(line: &str) -> String {
        line.chars().filter(|c| !c.is_ascii_digit()).collect()
    }
    let mut out = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let same = lines[i + 1..].iter().take_while(|l| *l == line).count();
        let (repeats, note) = if same > 0 || line.trim().is_empty() {
            (same, "previous")
        } else {
            let pattern = shape(line);
            let similar = lines[i + 1..].iter().take_while(|l| shape(l) == pattern).count();
            (similar, "similar")
        };
        out.push(line.clone());
        if repeats > 0 && !line.trim().is_empty() {
            let times = if repeats == 1 { "once".to_owned() } else { format!("{repeats} times") };
            out.push(format!("[{note} line repeated {times}]"));
        }
        i += 1 + repeats;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::extract::tests::words_are_whole;

    const PYTHON: &str = r#"Traceback (most recent call last):
  File "/srv/app/main.py", line 42, in <module>
    main()
  File "/srv/app/main.py", line 37, in main
    run(config)
  File "/srv/app/runner.py", line 118, in run
    result = step.execute(context)
  File "/srv/app/steps/fetch.py", line 64, in execute
    payload = self.client.get(url, timeout=self.timeout)
  File "/usr/lib/python3.12/site-packages/httpx/_client.py", line 1054, in get
    return self.request("GET", url, params=params)
  File "/usr/lib/python3.12/site-packages/httpx/_client.py", line 827, in request
    return self.send(request, auth=auth, follow_redirects=follow_redirects)
  File "/usr/lib/python3.12/site-packages/httpx/_client.py", line 914, in send
    response = self._send_handling_auth(request)
  File "/usr/lib/python3.12/site-packages/httpx/_transports/default.py", line 232, in handle_request
    with map_httpcore_exceptions():
  File "/srv/app/steps/parse.py", line 12, in parse_payload
    value = int(raw["count"])
ValueError: invalid literal for int() with base 10: 'twelve'"#;

    const RUST: &str = "thread 'main' panicked at src/state.rs:214:17:
called `Option::unwrap()` on a `None` value
stack backtrace:
   0: rust_begin_unwind
             at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/std/src/panicking.rs:665:5
   1: core::panicking::panic_fmt
             at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/panicking.rs:76:14
   2: core::panicking::panic
             at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/panicking.rs:148:5
   3: core::option::unwrap_failed
             at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/option.rs:2015:5
   4: engine::state::RunState::apply
             at ./src/state.rs:214:17
   5: engine::driver::Driver::step
             at ./src/driver.rs:88:9
   6: engine::driver::Driver::run
             at ./src/driver.rs:40:13
   7: runner::main
             at ./src/main.rs:12:5
   8: core::ops::function::FnOnce::call_once
             at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/ops/function.rs:250:5
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.";

    const NODE: &str = "TypeError: Cannot read properties of undefined (reading 'map')
    at renderList (/app/src/components/List.js:14:23)
    at processChild (/app/node_modules/react-dom/cjs/react-dom-server.node.development.js:3353:14)
    at resolve (/app/node_modules/react-dom/cjs/react-dom-server.node.development.js:3270:5)
    at ReactDOMServerRenderer.render (/app/node_modules/react-dom/cjs/react-dom-server.node.development.js:3753:22)
    at ReactDOMServerRenderer.read (/app/node_modules/react-dom/cjs/react-dom-server.node.development.js:3690:29)
    at renderToString (/app/node_modules/react-dom/cjs/react-dom-server.node.development.js:4298:27)
    at /app/src/server.js:31:18
    at Layer.handle [as handle_request] (/app/node_modules/express/lib/router/layer.js:95:5)
    at next (/app/node_modules/express/lib/router/route.js:137:13)
    at Route.dispatch (/app/node_modules/express/lib/router/route.js:112:3)";

    fn check(error: &str, limit: usize) -> String {
        let out = compact_error(error, limit);
        assert!(out.chars().count() <= limit, "{} > {limit}:\n{out}", out.chars().count());
        assert!(words_are_whole(error, &out), "{out}");
        out
    }

    #[test]
    fn short_errors_are_unchanged() {
        assert_eq!(compact_error("boom: it broke", 100), "boom: it broke");
        assert_eq!(compact_error(PYTHON, 10_000), PYTHON);
    }

    #[test]
    fn python_traceback_keeps_error_and_locations() {
        let out = check(PYTHON, 700);
        assert!(out.starts_with("Traceback (most recent call last):"), "{out}");
        assert!(out.contains("ValueError: invalid literal for int() with base 10: 'twelve'"), "{out}");
        assert!(out.contains(r#"File "/srv/app/main.py", line 42, in <module>"#), "{out}");
        assert!(out.contains(r#"File "/srv/app/steps/parse.py", line 12, in parse_payload"#), "{out}");
        assert!(out.contains("frames folded]"), "{out}");
        let tight = check(PYTHON, 250);
        assert!(tight.contains("ValueError: invalid literal"), "{tight}");
    }

    #[test]
    fn rust_panic_keeps_panic_line_and_folds_backtrace() {
        let out = check(RUST, 900);
        assert!(out.starts_with("thread 'main' panicked at src/state.rs:214:17:"), "{out}");
        assert!(out.contains("[… 6 frames folded]"), "{out}");
        assert!(out.contains("   0: rust_begin_unwind"), "{out}");
        assert!(out.contains("8: core::ops::function::FnOnce::call_once"), "{out}");
        let tight = check(RUST, 200);
        assert!(tight.starts_with("thread 'main' panicked at src/state.rs:214:17:"), "{tight}");
    }

    #[test]
    fn node_stack_keeps_type_and_first_frames() {
        let out = check(NODE, 600);
        assert!(out.starts_with("TypeError: Cannot read properties of undefined (reading 'map')"), "{out}");
        assert!(out.contains("at renderList (/app/src/components/List.js:14:23)"), "{out}");
        assert!(out.contains("[… 7 frames folded]"), "{out}");
        assert!(out.contains("at Route.dispatch"), "{out}");
    }

    #[test]
    fn repeated_log_lines_collapse() {
        let mut log = String::from("Error: connection pool exhausted\n");
        for _ in 0..500 {
            log.push_str("WARN retrying connection to db.internal:5432\n");
        }
        log.push_str("fatal: giving up after 500 attempts (see /var/log/app.log:88)\n");
        let out = check(&log, 400);
        assert_eq!(
            out,
            "Error: connection pool exhausted\nWARN retrying connection to db.internal:5432\n\
             [previous line repeated 499 times]\nfatal: giving up after 500 attempts (see /var/log/app.log:88)"
        );
        let numbered: String = (0..500).map(|i| format!("attempt {i} failed\n")).collect();
        let out = check(&numbered, 100);
        assert!(out.contains("[similar line repeated 499 times]"), "{out}");
    }

    #[test]
    fn tiny_limits_and_unicode() {
        let error = "Fehler: Datei «größe.txt» nicht gefunden — überprüfen Sie den Pfad\n".repeat(30);
        for limit in [0, 1, 5, 17, 40, 90] {
            check(&error, limit);
        }
        check(&"x".repeat(1000), 10);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn never_exceeds_the_limit(error in any::<String>(), lines in proptest::collection::vec("( {0,4})(at |File \"a.py\", line 3|[0-9]: )?[a-zé/.:0-9 ]{0,30}", 0..30), limit in 0usize..300) {
                for error in [error, lines.join("\n")] {
                    let out = compact_error(&error, limit);
                    prop_assert!(out.chars().count() <= limit);
                    prop_assert!(words_are_whole(&error, &out), "{:?}", out);
                }
            }
        }
    }
}
