//! A line scan of the YAML text: where each key and sequence item is, and
//! which keys are written twice. serde gives no spans for values, so
//! validation errors find their line here.

use std::collections::HashMap;

/// Lines of the keys and sequence items of a YAML text, by path. A key
/// written twice resolves to its last occurrence, the one serde keeps.
///
/// A path is the list of keys from the root; sequence items are `#0`, `#1`,
/// ... Only block-style structure is tracked; anything inside a flow
/// collection (`{ ... }`, `[ ... ]`) resolves to the line of its key.
#[derive(Debug, Clone, Default)]
pub struct LineIndex {
    last_line: HashMap<String, usize>,
    duplicates: Vec<Duplicate>,
}

/// A key written twice in the same mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    /// Path of the mapping holding the key.
    pub parent: Vec<String>,
    /// The repeated key.
    pub key: String,
    /// Line of the first occurrence.
    pub first_line: usize,
    /// Line of the repeat.
    pub line: usize,
}

struct Frame {
    indent: usize,
    key: String,
    item: bool,
    uid: usize,
}

const SEP: char = '\n';

impl LineIndex {
    /// Scans `text`.
    pub fn scan(text: &str) -> LineIndex {
        let mut index = LineIndex::default();
        let mut stack: Vec<Frame> = Vec::new();
        let mut item_counts: HashMap<usize, usize> = HashMap::new();
        let mut seen: HashMap<(usize, String), usize> = HashMap::new();
        let mut next_uid = 1usize;
        for (number, raw) in text.lines().enumerate() {
            let line = number + 1;
            let mut col = raw.len() - raw.trim_start_matches(' ').len();
            let mut rest = &raw[col..];
            if rest.is_empty()
                || rest.starts_with('#')
                || rest.starts_with("---")
                || rest.starts_with("...")
            {
                continue;
            }
            while rest == "-" || rest.starts_with("- ") {
                while stack
                    .last()
                    .is_some_and(|f| f.indent > col || (f.indent == col && f.item))
                {
                    stack.pop();
                }
                let parent_uid = stack.last().map_or(0, |f| f.uid);
                let count = item_counts.entry(parent_uid).or_insert(0);
                let key = format!("#{count}");
                *count += 1;
                let uid = next_uid;
                next_uid += 1;
                stack.push(Frame {
                    indent: col,
                    key,
                    item: true,
                    uid,
                });
                index.record(&stack, line);
                let after = rest.get(1..).unwrap_or("");
                let trimmed = after.trim_start_matches(' ');
                col += 1 + after.len() - trimmed.len();
                rest = trimmed;
            }
            let Some(key) = leading_key(rest) else {
                continue;
            };
            while stack.last().is_some_and(|f| f.indent >= col) {
                stack.pop();
            }
            let parent_uid = stack.last().map_or(0, |f| f.uid);
            match seen.get(&(parent_uid, key.clone())) {
                Some(&first_line) => index.duplicates.push(Duplicate {
                    parent: stack.iter().map(|f| f.key.clone()).collect(),
                    key: key.clone(),
                    first_line,
                    line,
                }),
                None => {
                    seen.insert((parent_uid, key.clone()), line);
                }
            }
            let uid = next_uid;
            next_uid += 1;
            stack.push(Frame {
                indent: col,
                key,
                item: false,
                uid,
            });
            index.record(&stack, line);
        }
        index
    }

    fn record(&mut self, stack: &[Frame], line: usize) {
        let path = join(stack.iter().map(|f| f.key.as_str()));
        self.last_line.insert(path, line);
    }

    /// The (last) line of `path`, or of its nearest ancestor found; 0 if none.
    pub fn line(&self, path: &[&str]) -> usize {
        (1..=path.len())
            .rev()
            .find_map(|n| self.last_line.get(&join(path[..n].iter().copied())))
            .copied()
            .unwrap_or(0)
    }

    /// The line of `path` itself, if it is written in the text.
    pub fn exact_line(&self, path: &[&str]) -> Option<usize> {
        self.last_line.get(&join(path.iter().copied())).copied()
    }

    /// Keys written twice in the same mapping, in text order.
    pub fn duplicates(&self) -> &[Duplicate] {
        &self.duplicates
    }
}

fn join<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for (i, part) in parts.enumerate() {
        if i > 0 {
            out.push(SEP);
        }
        out.push_str(part);
    }
    out
}

/// The mapping key a line starts with (`name:` or `"name":`), unquoted.
fn leading_key(rest: &str) -> Option<String> {
    let first = rest.chars().next()?;
    if first == '"' || first == '\'' {
        let body = &rest[1..];
        let end = body.find(first)?;
        let after = body[end + 1..].trim_start_matches(' ');
        return is_key_colon(after).then(|| body[..end].to_owned());
    }
    if matches!(
        first,
        '{' | '[' | '}' | ']' | ',' | '&' | '*' | '!' | '|' | '>' | '%' | '@' | '`' | '?'
    ) {
        return None;
    }
    let bytes = rest.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'#' && i > 0 && bytes[i - 1] == b' ' {
            return None;
        }
        if b == b':' && is_key_colon(&rest[i..]) {
            let key = rest[..i].trim_end();
            return (!key.is_empty()).then(|| key.to_owned());
        }
    }
    None
}

fn is_key_colon(s: &str) -> bool {
    s.starts_with(':') && matches!(s.as_bytes().get(1), None | Some(b' ') | Some(b'\t'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
listen: 1.2.3.4:1
fleets:
  main:
    shards: 8
    hosts:
      - { range: [0, 3], master: a:1 }
      - range: [4, 7]
        master: b:1
  mod:
    hosts:
    - range: [0, 7]
      master: c:1
tables:
  pins: { fleet: main, object: pin }
  # a comment: not a key
  \"boards\": { fleet: main }
  pins: { fleet: mod }
";

    #[test]
    fn finds_keys_and_items() {
        let idx = LineIndex::scan(TEXT);
        assert_eq!(idx.line(&["listen"]), 1);
        assert_eq!(idx.line(&["fleets", "main", "shards"]), 4);
        assert_eq!(idx.line(&["fleets", "main", "hosts", "#0"]), 6);
        assert_eq!(idx.line(&["fleets", "main", "hosts", "#1"]), 7);
        assert_eq!(idx.line(&["fleets", "main", "hosts", "#1", "master"]), 8);
        assert_eq!(idx.line(&["fleets", "mod", "hosts", "#0"]), 11);
        assert_eq!(idx.line(&["fleets", "mod", "hosts", "#0", "master"]), 12);
        assert_eq!(idx.line(&["tables", "pins", "fleet"]), 17);
        assert_eq!(idx.line(&["tables", "boards"]), 16);
        assert_eq!(idx.line(&["nothing"]), 0);
        assert_eq!(idx.exact_line(&["fleets", "mod", "hosts", "#1"]), None);
    }

    #[test]
    fn finds_duplicates() {
        let idx = LineIndex::scan(TEXT);
        assert_eq!(
            idx.duplicates(),
            &[Duplicate {
                parent: vec!["tables".into()],
                key: "pins".into(),
                first_line: 14,
                line: 17,
            }]
        );
    }
}
