//! Normalised text into blocks: list items, paragraphs, code blocks and headings.

/// What a block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    /// A list item, without its marker.
    Item,
    /// Consecutive lines of prose, joined with spaces.
    Paragraph,
    /// The lines of a fenced code block, fences included.
    Code,
    /// A Markdown heading: structure, not a step.
    Heading,
}

/// One block of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    pub kind: BlockKind,
    pub text: String,
}

/// Characters that mark a list item when a space (or the end of the line) follows them.
const BULLETS: &[char] = &['-', '*', '+', '•', '◦', '▪', '▫', '‣', '●', '○', '■', '□', '➢', '►', '✓', '✔'];

/// Splits normalised text into blocks (see the module doc of `steps` for the rules).
pub(crate) fn blocks(text: &str) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    let mut current: Option<Block> = None;
    let mut code: Option<String> = None;
    for line in text.split('\n') {
        let body = line.trim_start();
        if let Some(lines) = code.as_mut() {
            lines.push('\n');
            lines.push_str(body);
            if body.starts_with("```") {
                out.push(Block { kind: BlockKind::Code, text: code.take().unwrap_or_default() });
            }
            continue;
        }
        let indented = body.len() < line.len();
        if body.starts_with("```") {
            out.extend(current.take());
            code = Some(body.to_owned());
        } else if body.is_empty() {
            out.extend(current.take());
        } else if let Some(rest) = list_item(body) {
            out.extend(current.take());
            current = Some(Block { kind: BlockKind::Item, text: rest.to_owned() });
        } else if let Some(title) = heading(body) {
            out.extend(current.take());
            out.push(Block { kind: BlockKind::Heading, text: title.to_owned() });
        } else {
            match current.as_mut() {
                Some(block) if block.kind == BlockKind::Paragraph || indented => {
                    if !block.text.is_empty() {
                        block.text.push(' ');
                    }
                    block.text.push_str(body);
                }
                _ => {
                    out.extend(current.take());
                    current = Some(Block { kind: BlockKind::Paragraph, text: body.to_owned() });
                }
            }
        }
    }
    out.extend(current);
    if let Some(lines) = code {
        out.push(Block { kind: BlockKind::Code, text: lines });
    }
    out
}

/// The text of a list item after its marker, or `None` when the line is not one.
pub(crate) fn list_item(line: &str) -> Option<&str> {
    let rest = marker(line)?;
    let rest = rest.trim_start();
    // A Markdown task list: `- [ ] write tests`.
    let rest = ["[ ] ", "[x] ", "[X] "].iter().find_map(|box_| rest.strip_prefix(box_)).unwrap_or(rest);
    Some(rest)
}

/// What follows a list marker, or `None` without a marker.
fn marker(line: &str) -> Option<&str> {
    let mut chars = line.chars();
    let first = chars.next()?;
    if BULLETS.contains(&first) {
        return after_space_or_end(chars.as_str());
    }
    let bytes = line.as_bytes();
    let (open, start) = if first == '(' { (true, 1) } else { (false, 0) };
    let digits = bytes[start..].iter().take_while(|b| b.is_ascii_digit()).count();
    let letter = digits == 0
        && bytes.get(start).is_some_and(u8::is_ascii_alphabetic)
        && !bytes.get(start + 1).is_some_and(u8::is_ascii_alphanumeric);
    let end = match digits {
        1..=3 => start + digits,
        0 if letter => start + 1,
        _ => return step_label(line),
    };
    // `1.` `1)` `(1)` `a)` `(a)`; not `a.`, too often the end of a word.
    let closes = match bytes.get(end) {
        Some(b')') => true,
        Some(b'.') => !open && !letter,
        _ => false,
    };
    if !closes {
        return step_label(line);
    }
    after_space_or_end(&line[end + 1..]).or_else(|| step_label(line))
}

/// `Step 1:`, `Step 2.`, `step 3)` and `Step 4 -`.
fn step_label(line: &str) -> Option<&str> {
    let head = line.get(..4)?;
    if !head.eq_ignore_ascii_case("step") {
        return None;
    }
    let rest = line[4..].trim_start();
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = rest[digits..].trim_start();
    let rest = rest.strip_prefix([':', '.', ')', '-'])?;
    after_space_or_end(rest)
}

fn after_space_or_end(rest: &str) -> Option<&str> {
    (rest.is_empty() || rest.starts_with(' ')).then_some(rest)
}

/// The title of a Markdown heading (`#` to `######` and a space).
fn heading(line: &str) -> Option<&str> {
    let hashes = line.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    rest.starts_with(' ').then(|| rest.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers() {
        for (line, rest) in [
            ("- a", Some("a")),
            ("* a", Some("a")),
            ("• a", Some("a")),
            ("1. a", Some("a")),
            ("12) a", Some("a")),
            ("(3) a", Some("a")),
            ("a) a", Some("a")),
            ("(b) a", Some("a")),
            ("Step 2: a", Some("a")),
            ("- [ ] a", Some("a")),
            ("-", Some("")),
            ("-x", None),
            ("1.5 litres", None),
            ("2024. A year", None),
            ("a. b", None),
            ("ab) c", None),
            ("Stepping", None),
            ("plain", None),
        ] {
            assert_eq!(list_item(line), rest, "{line}");
        }
    }

    #[test]
    fn blocks_follow_the_layout() {
        let got = blocks("Intro line\nwraps here.\n- one\n  continues\n- two\nprose\n# Title\n```\nls\n```");
        let kinds: Vec<_> = got.iter().map(|b| (b.kind, b.text.as_str())).collect();
        assert_eq!(
            kinds,
            [
                (BlockKind::Paragraph, "Intro line wraps here."),
                (BlockKind::Item, "one continues"),
                (BlockKind::Item, "two"),
                (BlockKind::Paragraph, "prose"),
                (BlockKind::Heading, "Title"),
                (BlockKind::Code, "```\nls\n```"),
            ]
        );
    }
}
