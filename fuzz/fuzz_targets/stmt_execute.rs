//! COM_STMT_EXECUTE: `protocol::binary::parse_execute` with an arbitrary
//! parameter count, kept parameter types and long data, then every value
//! rendered as an SQL literal (`render_literal`) in several character sets,
//! read with and without NO_BACKSLASH_ESCAPES. Checks: no panic; one value
//! per parameter; only non-finite floats and non-numeric DECIMAL text are
//! refused; each rendered value is exactly one literal token (an independent scanner of
//! MariaDB's rules, `shardgate_fuzz::scan`) that stands for exactly the
//! value bound (bytes, number, NULL).
//!
//! Input: a 2-byte parameter count (below 16 unless its top bit is set),
//! a count and that many 2-byte kept types, a count and that many long
//! data entries (2-byte index, 2-byte length, then the bytes, or with the
//! length's top bit set a fill of up to 1 MiB), then the payload.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use mysql_common::constants::ColumnType;
use shardgate::protocol::binary::{parse_execute, render_literal, ParamValue};
use shardgate::protocol::charset::Charset;
use shardgate_fuzz::input::Input;
use shardgate_fuzz::scan::{single_literal, LexFlags, Literal};

/// The character sets values are rendered in: every class the renderer
/// treats differently (UTF-8, single byte, binary, ASCII-trail multibyte).
const CHARSETS: [&str; 5] = ["utf8mb4", "latin1", "binary", "gbk", "sjis"];

fn check_rendered(value: &ParamValue, charset: Charset, no_backslash_escapes: bool) {
    let mut out = String::new();
    if render_literal(value, charset, &mut out).is_err() {
        // Refused (1210): only what no literal can stand for.
        let refusable = match value {
            ParamValue::Float(v) => !v.is_finite(),
            ParamValue::Decimal(text) => single_literal(text.as_bytes(), &LexFlags::default())
                .is_none_or(|literal| !matches!(literal, Literal::Number(_))),
            _ => false,
        };
        assert!(refusable, "{value:?} refused in {}", charset.name());
        return;
    }
    let flags = LexFlags {
        no_backslash_escapes,
        ..LexFlags::default()
    };
    let Some(literal) = single_literal(out.as_bytes(), &flags) else {
        panic!("{value:?} rendered as {out:?}, which is not exactly one literal (no_backslash_escapes={no_backslash_escapes})");
    };
    let number = |text: &str| match &literal {
        Literal::Number(n) => n == text,
        _ => false,
    };
    let ok = match value {
        ParamValue::Null => literal == Literal::Null,
        ParamValue::Int(v) => number(&v.to_string()),
        ParamValue::UInt(v) => number(&v.to_string()),
        ParamValue::Float(v) => match &literal {
            Literal::Number(n) => n.parse::<f64>().ok() == Some(*v),
            _ => false,
        },
        ParamValue::Decimal(text) => number(text),
        ParamValue::Bytes { data, .. } => {
            matches!(&literal, Literal::Bytes { bytes, hex: true, .. } if bytes == data)
        }
        ParamValue::Date(_) | ParamValue::Time(_) => {
            matches!(&literal, Literal::Bytes { hex: false, .. })
        }
    };
    assert!(
        ok,
        "{value:?} rendered as {out:?}, read back as {literal:?} (no_backslash_escapes={no_backslash_escapes})"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let count = input.u16();
    let param_count = usize::from(if count & 0x8000 != 0 {
        count & 0x7FFF
    } else {
        count % 16
    });
    let mut types = Vec::new();
    for _ in 0..input.u8() {
        let type_byte = input.u8();
        let flags = input.u8();
        if let Ok(column_type) = ColumnType::try_from(type_byte) {
            types.push((column_type, flags & 0x80 != 0));
        }
    }
    let mut long_data = HashMap::new();
    for _ in 0..input.u8() % 8 {
        let index = input.u16();
        let len = input.u16();
        let bytes = if len & 0x8000 != 0 {
            let fill = input.u8();
            vec![fill; usize::from(len & 0x7FFF) * 32]
        } else {
            input.take(usize::from(len)).to_vec()
        };
        long_data.insert(index, bytes);
    }
    let payload = input.rest();

    let kept = types.clone();
    let Ok(request) = parse_execute(payload, param_count, &mut types, &mut long_data) else {
        return;
    };
    assert_eq!(request.params.len(), param_count);
    if types != kept {
        assert_eq!(
            types.len(),
            param_count,
            "new types bound, but not one per parameter"
        );
    }
    for value in &request.params {
        for name in CHARSETS {
            let Some(charset) = Charset::from_name(name) else {
                panic!("harness: {name} is not a known character set");
            };
            check_rendered(value, charset, false);
            check_rendered(value, charset, true);
        }
    }
});
