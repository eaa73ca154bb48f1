//! The JSON reader against the YAML reader: the same trees, and the same refusals.

mod documents;

use proptest::prelude::*;

use super::*;
use crate::tree::{self, parse_yaml};
use documents::{json, layout, object, render};

/// The path and both sides of the first place two trees differ, floats compared by bits.
fn first_difference(a: &Node, b: &Node, path: &str) -> Option<String> {
    let differ = |what: &str| Some(format!("at `{path}`: {what}: json {a:?} vs yaml {b:?}"));
    if a.span() != b.span() {
        return Some(format!("at `{path}`: span json {:?} vs yaml {:?}", a.span(), b.span()));
    }
    match (&a.value, &b.value) {
        (Value::Float(x), Value::Float(y)) if x.to_bits() != y.to_bits() => differ("float"),
        (Value::Seq(xs), Value::Seq(ys)) => {
            if xs.len() != ys.len() {
                return differ("length");
            }
            xs.iter().zip(ys).enumerate().find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}[{i}]")))
        }
        (Value::Map(xs), Value::Map(ys)) => {
            if xs.len() != ys.len() {
                return differ("length");
            }
            xs.iter().zip(ys).enumerate().find_map(|(i, ((kx, vx), (ky, vy)))| {
                first_difference(kx, ky, &format!("{path}.key{i}"))
                    .or_else(|| first_difference(vx, vy, &format!("{path}.value{i}")))
            })
        }
        (Value::Seq(_) | Value::Map(_), _) | (_, Value::Seq(_) | Value::Map(_)) => differ("kind"),
        (x, y) if x != y => differ("value"),
        _ => None,
    }
}

fn assert_same_tree(text: &str) {
    let json = parse(text).unwrap_or_else(|_| panic!("the JSON reader refused {text:?}"));
    let yaml = parse_yaml(text).unwrap_or_else(|e| panic!("the YAML reader refused {text:?}: {}", e.message));
    if let Some(difference) = first_difference(&json, &yaml, "") {
        panic!("the readers differ {difference}\nin {text:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn json_reader_builds_the_yaml_readers_tree(
        document in object(json()),
        layout in layout(),
        seed in any::<u64>(),
    ) {
        let text = render(&document, layout, seed);
        match (parse(&text), parse_yaml(&text)) {
            (Ok(json), Ok(yaml)) => {
                let difference = first_difference(&json, &yaml, "");
                prop_assert!(difference.is_none(), "the readers differ {}\nin {:?}", difference.unwrap_or_default(), text);
            }
            // Only a raw character YAML refuses makes valid JSON unreadable; both must refuse it.
            (Err(_), Err(_)) => {}
            (Ok(_), Err(error)) => prop_assert!(false, "only the YAML reader refused {:?}: {}", text, error.message),
            (Err(_), Ok(_)) => prop_assert!(false, "only the JSON reader refused {:?}", text),
        }
    }
}

#[test]
fn number_forms_read_alike() {
    for number in [
        "0",
        "-0",
        "7",
        "-7",
        "0.5",
        "-0.0",
        "1.5e3",
        "1E-3",
        "2e+2",
        "0e0",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "-9223372036854775809",
        "18446744073709551616",
        "123456789012345678901234567890",
        "1e99",
        "1.7976931348623157e308",
    ] {
        assert_same_tree(&format!("{{\"n\": {number}}}"));
    }
}

#[test]
fn surrogate_pairs_and_escapes_read_alike() {
    assert_same_tree(r#"{"s": "\ud83d\ude00 \u00e9 \/ \b\f\n\r\t \" \\ \u0000"}"#);
}

/// Runs `test` on a thread with the 2 MiB stack Rust gives spawned threads (tokio's workers
/// too): serde-saphyr recurses once per nesting level, and the limit must fit there even in
/// an unoptimised build.
fn on_a_small_stack(test: impl FnOnce() + Send + 'static) {
    let thread = std::thread::Builder::new().stack_size(2 << 20).spawn(test).expect("spawn");
    if let Err(panic) = thread.join() {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn nesting_at_the_limit_reads_alike_and_one_deeper_is_refused_by_both() {
    on_a_small_stack(|| {
        let nested =
            |depth: usize, inner: &str| format!("{{\"a\": {}{inner}{}}}", "[".repeat(depth - 1), "]".repeat(depth - 1));
        // The innermost value, and how many levels it adds itself.
        for (inner, levels) in [("", 0), ("1", 0), ("{}", 1), ("{\"b\": []}", 2)] {
            assert_same_tree(&nested(MAX_DEPTH - levels, inner));
            let deeper = nested(MAX_DEPTH + 1 - levels, inner);
            assert!(parse(&deeper).is_err(), "{deeper}");
            assert!(parse_yaml(&deeper).is_err(), "{deeper}");
        }
    });
}

#[test]
fn duplicate_keys_are_left_to_the_yaml_reader() {
    for text in [r#"{"a": 1, "a": 2}"#, r#"{"a": {"b": 1, "c": 2, "b": 3}}"#, r#"{"x": [{"k": 1, "k": 1}]}"#] {
        assert!(parse(text).is_err(), "{text}");
        let error = tree::parse(text).expect_err(text);
        assert!(error.message.contains("duplicate"), "{}", error.message);
    }
}

#[test]
fn nesting_deeper_than_the_limit_is_refused() {
    on_a_small_stack(|| {
        let deep = format!("{}1{}", "{\"a\": ".repeat(MAX_DEPTH + 1), "}".repeat(MAX_DEPTH + 1));
        assert!(parse(&deep).is_err());
        let error = tree::parse(&deep).expect_err("too deep");
        assert_eq!(error.kind, tree::SyntaxKind::Limit(tree::Limit::Depth), "{}", error.message);
        // A planner's answer is reported with this message: words, not Rust debug text.
        assert!(error.message.contains("nests deeper than") && !error.message.contains('{'), "{}", error.message);
        let deep_list = format!("{{\"a\": {}{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse(&deep_list).is_err());
        assert!(tree::parse(&deep_list).is_err());
    });
}

#[test]
fn leading_zeros_are_not_json() {
    for number in ["01", "-01", "00", "007.5", "00e1"] {
        assert!(parse(&format!("{{\"n\": {number}}}")).is_err(), "{number}");
    }
    for number in ["0", "-0", "0.5", "0e1", "10"] {
        assert!(parse(&format!("{{\"n\": {number}}}")).is_ok(), "{number}");
    }
}

#[test]
fn malformed_numbers_are_not_json() {
    for number in ["-", "1.", ".5", "-.5", "1e", "1e+", "1.e5", "+1", "1-2", "1e400", "--1", "0x10"] {
        assert!(parse(&format!("{{\"n\": {number}}}")).is_err(), "{number}");
    }
}

#[test]
fn lone_surrogates_and_bad_escapes_are_not_json() {
    for escape in [r"\ud800", r"\udc00", r"\ud800\u0041", r"\ud800x", r"\udbff\ud800", r"\u12", r"\u+123", r"\x41"] {
        assert!(parse(&format!("{{\"s\": \"{escape}\"}}")).is_err(), "{escape}");
    }
}

#[test]
fn characters_yaml_refuses_are_left_to_the_yaml_reader() {
    for c in ['\u{7f}', '\u{80}', '\u{84}', '\u{86}', '\u{9f}', '\u{fffe}', '\u{ffff}'] {
        let text = format!("{{\"s\": \"a{c}b\"}}");
        assert!(parse(&text).is_err(), "{c:?}");
        assert!(parse_yaml(&text).is_err(), "{c:?}");
    }
    assert_same_tree("{\"s\": \"\u{85}\u{a0}\u{fffd}\u{feff}\u{10ffff}\\u007f\\ufffe\"}");
}

#[test]
fn trailing_garbage_is_not_json() {
    for text in [r#"{"a": 1} x"#, r#"{"a": 1}}"#, r#"{"a": 1},"#, r#"{"a": 1} {"b": 2}"#, r#"{"a": 1,}"#, r#"{"a" 1}"#]
    {
        assert!(parse(text).is_err(), "{text}");
    }
}

#[test]
fn a_duplicate_among_twenty_thousand_keys_is_found() {
    let mut keys: Vec<String> = (0..20_000).map(|i| format!("\"key{i}\": {i}")).collect();
    let unique = format!("{{{}}}", keys.join(","));
    let Ok(Node { value: Value::Map(entries), .. }) = parse(&unique) else { panic!("20k unique keys refused") };
    assert_eq!(entries.len(), 20_000);
    keys.push("\"key10000\": 0".to_owned());
    assert!(parse(&format!("{{{}}}", keys.join(","))).is_err());
    keys.pop();
    keys[19_999] = "\"key3\": 0".to_owned();
    assert!(parse(&format!("{{{}}}", keys.join(","))).is_err());
}
