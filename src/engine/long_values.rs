//! Long values of a prepared statement set aside while its text is routed.
//!
//! A bound string or blob is written into the statement text as a hex
//! literal, twice its size, and sqlparser's token of that literal would
//! hold as much again. A value of [`SET_ASIDE_BYTES`] or more (long data,
//! or a long value in the COM_STMT_EXECUTE packet) is therefore bound as a
//! short stub (`_cs X'<stub>'`: the introducer the value itself gets, the
//! hex of [`LONG_VALUE_STUB_PREFIX`] and the parameter's index), and the
//! text is routed with it. The router reads a stub as an expression of
//! unknown value, never as a key ([`crate::router::is_long_value_stub`]).
//!
//! When the plan sends one text to one host (a shard, or any host) and that
//! text holds each stub exactly once, the values are spliced into it
//! ([`SetAside::splice`]) before it runs: no rewritten text, routing key or
//! cached parse ever holds a stub that reaches a server. Any other plan (a
//! SET the session records, a read over several shards, a refusal, ...) is
//! dropped and the whole text is routed again as before
//! ([`SetAside::fallback`]).

use bytes::Bytes;

use crate::protocol::binary::{bytes_are_text, push_hex, ParamValue};
use crate::protocol::charset::Charset;
use crate::router::{Plan, SqlText, LONG_VALUE_STUB_PREFIX};

/// Bound string values this long or longer are set aside.
pub const SET_ASIDE_BYTES: usize = 4096;

/// The values set aside for one execute.
#[derive(Debug, Default)]
pub struct SetAside {
    values: Vec<Value>,
    /// The plan of the text with stubs could not take the values: the
    /// execute routes the whole text instead.
    fallback: bool,
}

#[derive(Debug)]
struct Value {
    /// The stub literal as written in the text (`X'..'`).
    stub: String,
    /// The value's bytes.
    data: Vec<u8>,
}

impl SetAside {
    /// Replaces every long string value of `params` by its stub; `None` if
    /// none is long, or if `sql` (the client's text) spells a stub itself.
    pub fn take_long_values(
        sql: &str,
        params: &mut [ParamValue],
        charset: Charset,
    ) -> Option<SetAside> {
        let long = |value: &ParamValue| matches!(value, ParamValue::Bytes { data, .. } if data.len() >= SET_ASIDE_BYTES);
        if !params.iter().any(long) || spells_stub(sql) {
            return None;
        }
        let mut values = Vec::new();
        for (index, value) in params.iter_mut().enumerate() {
            if !long(value) {
                continue;
            }
            let ParamValue::Bytes { data, binary } = value else {
                continue;
            };
            let mut marker = LONG_VALUE_STUB_PREFIX.to_vec();
            marker.extend_from_slice(index.to_string().as_bytes());
            marker.push(0x01);
            let mut stub = String::new();
            push_hex(&marker, &mut stub);
            // ASCII: text in any client character set, so the stub gets
            // the introducer the value gets.
            let as_text = bytes_are_text(data, *binary, charset);
            let data = std::mem::replace(data, marker);
            *binary = !as_text;
            values.push(Value { stub, data });
        }
        Some(SetAside {
            values,
            fallback: false,
        })
    }

    /// Bytes the values add to the text once spliced in (their hex less
    /// their stubs).
    pub fn extra_bytes(&self) -> u64 {
        self.values
            .iter()
            .map(|v| (2 * v.data.len() + 3).saturating_sub(v.stub.len()) as u64)
            .sum()
    }

    /// Whether the plan of the text with stubs was dropped
    /// ([`SetAside::splice`] answered `None`).
    pub fn fallback(&self) -> bool {
        self.fallback
    }

    /// `plan` with the values spliced into the one text it sends; `None`
    /// (and [`SetAside::fallback`] set) when the plan is not one text for
    /// one host, or its text does not hold each stub exactly once.
    pub fn splice(&mut self, plan: Plan) -> Option<Plan> {
        let spliced = match plan {
            Plan::Shard(mut query) => self.splice_text(&query.sql).map(|sql| {
                query.sql = sql;
                Plan::Shard(query)
            }),
            Plan::AnyHost {
                sql,
                writes_through_function,
            } => self.splice_text(&sql).map(|sql| Plan::AnyHost {
                sql,
                writes_through_function,
            }),
            _ => None,
        };
        self.fallback = spliced.is_none();
        spliced
    }

    /// The whole text: `text` (the statement bound with stubs, each once)
    /// with the values in place of their stubs.
    pub fn into_text(self, text: &[u8]) -> Option<Bytes> {
        self.splice_text(text).map(|sql| sql.0)
    }

    fn splice_text(&self, text: &[u8]) -> Option<SqlText> {
        let mut at = Vec::with_capacity(self.values.len());
        for value in &self.values {
            let mut found = find_all(text, value.stub.as_bytes());
            let start = found.next()?;
            if found.next().is_some() {
                return None;
            }
            at.push((start, value));
        }
        at.sort_by_key(|(start, _)| *start);
        let room = text.len() as u64 + self.extra_bytes();
        let mut out = String::with_capacity(usize::try_from(room).ok()?);
        let mut copied = 0;
        for (start, value) in at {
            out.push_str(std::str::from_utf8(text.get(copied..start)?).ok()?);
            push_hex(&value.data, &mut out);
            copied = start + value.stub.len();
        }
        out.push_str(std::str::from_utf8(text.get(copied..)?).ok()?);
        Some(SqlText::from(out))
    }
}

/// Whether `sql` holds the hex of [`LONG_VALUE_STUB_PREFIX`] (either case).
fn spells_stub(sql: &str) -> bool {
    let mut prefix = String::new();
    push_hex(LONG_VALUE_STUB_PREFIX, &mut prefix);
    let digits = &prefix.as_bytes()[2..prefix.len() - 1];
    sql.as_bytes()
        .windows(digits.len())
        .any(|window| window.eq_ignore_ascii_case(digits))
}

/// Start offsets of `needle` in `haystack`.
fn find_all<'a>(haystack: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    haystack
        .windows(needle.len())
        .enumerate()
        .filter(move |(_, window)| *window == needle)
        .map(|(start, _)| start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::binary::render_literal;

    fn rendered(sql_head: &str, value: &ParamValue, tail: &str) -> String {
        let mut text = sql_head.to_owned();
        render_literal(value, Charset::UTF8MB4, &mut text).unwrap();
        text.push_str(tail);
        text
    }

    #[test]
    fn a_long_value_is_bound_as_a_stub_and_spliced_back_byte_exact() {
        let long = vec![b'x'; SET_ASIDE_BYTES];
        let blob = vec![0xFFu8; SET_ASIDE_BYTES + 1];
        let mut params = vec![
            ParamValue::Int(5),
            ParamValue::Bytes {
                data: long.clone(),
                binary: false,
            },
            ParamValue::Bytes {
                data: blob.clone(),
                binary: false,
            },
        ];
        let whole: Vec<String> = params
            .iter()
            .map(|p| rendered("", p, ""))
            .collect::<Vec<_>>();
        let aside = SetAside::take_long_values("SELECT ?, ?, ?", &mut params, Charset::UTF8MB4)
            .expect("two long values");
        assert_eq!(params[0], ParamValue::Int(5));
        let stubs: Vec<String> = params.iter().map(|p| rendered("", p, "")).collect();
        // Same introducer as the value: text for the text, binary for
        // bytes that are not UTF-8.
        assert!(stubs[1].starts_with("_utf8mb4 X'0173"), "{}", stubs[1]);
        assert!(stubs[2].starts_with("_binary X'0173"), "{}", stubs[2]);
        assert!(stubs[1].len() < 100);
        let text = format!("SELECT 5, {}, {}", stubs[1], stubs[2]);
        let expected = format!("SELECT 5, {}, {}", whole[1], whole[2]);
        assert_eq!(
            aside.extra_bytes() as usize,
            expected.len() - text.len(),
            "extra bytes"
        );
        assert_eq!(
            aside.into_text(text.as_bytes()).as_deref(),
            Some(expected.as_bytes())
        );
    }

    #[test]
    fn a_stub_seen_twice_or_a_plan_over_several_hosts_falls_back() {
        let mut params = vec![ParamValue::Bytes {
            data: vec![b'y'; SET_ASIDE_BYTES],
            binary: true,
        }];
        let mut aside =
            SetAside::take_long_values("SELECT ?", &mut params, Charset::UTF8MB4).unwrap();
        let stub = rendered("", &params[0], "");
        let twice = format!("SELECT {stub}, {stub}");
        assert!(aside
            .splice(Plan::AnyHost {
                sql: SqlText::from(twice.as_str()),
                writes_through_function: false,
            })
            .is_none());
        assert!(aside.fallback());
        let once = format!("SELECT {stub}");
        let Some(Plan::AnyHost { sql, .. }) = aside.splice(Plan::AnyHost {
            sql: SqlText::from(once.as_str()),
            writes_through_function: false,
        }) else {
            panic!("spliced");
        };
        assert!(!aside.fallback());
        assert_eq!(sql.len(), "SELECT _binary X''".len() + 2 * SET_ASIDE_BYTES);
        let session = Plan::Session(crate::router::SessionAction::Commit);
        assert!(aside.splice(session).is_none());
        assert!(aside.fallback());
    }

    #[test]
    fn short_values_and_texts_that_spell_a_stub_are_bound_whole() {
        let mut short = vec![ParamValue::Bytes {
            data: vec![b'z'; SET_ASIDE_BYTES - 1],
            binary: false,
        }];
        assert!(SetAside::take_long_values("SELECT ?", &mut short, Charset::UTF8MB4).is_none());
        let mut long = vec![ParamValue::Bytes {
            data: vec![b'z'; SET_ASIDE_BYTES],
            binary: false,
        }];
        let mut prefix = String::new();
        push_hex(LONG_VALUE_STUB_PREFIX, &mut prefix);
        let near = prefix.replace("6C6F6E67", "6C6F6E68");
        assert!(SetAside::take_long_values(
            &format!("SELECT ?, {near}"),
            &mut long,
            Charset::UTF8MB4
        )
        .is_some());
        let spelled = format!("SELECT ?, {}", prefix.to_lowercase());
        assert!(spells_stub(&spelled));
        let mut long = vec![ParamValue::Bytes {
            data: vec![b'z'; SET_ASIDE_BYTES],
            binary: false,
        }];
        assert!(SetAside::take_long_values(&spelled, &mut long, Charset::UTF8MB4).is_none());
    }
}
