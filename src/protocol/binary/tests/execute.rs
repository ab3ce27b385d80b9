//! COM_STMT_EXECUTE decoding.

use super::*;

#[test]
fn execute_with_types_then_without() {
    let mut types = Vec::new();
    // 3 params: BIGINT 42, VARCHAR 'abc', INT UNSIGNED NULL (bit 2).
    let mut p = exec_header(9);
    p.push(0b0000_0100);
    p.push(1);
    p.extend_from_slice(&[T::MYSQL_TYPE_LONGLONG as u8, 0x00]);
    p.extend_from_slice(&[T::MYSQL_TYPE_VAR_STRING as u8, 0x00]);
    p.extend_from_slice(&[T::MYSQL_TYPE_LONG as u8, 0x80]);
    p.extend_from_slice(&42i64.to_le_bytes());
    write_lenenc_bytes(&mut p, b"abc");
    let req = parse_execute(&p, 3, &mut types, &mut no_long_data()).unwrap();
    assert_eq!(
        req,
        ExecuteRequest {
            statement_id: 9,
            cursor_flags: 0,
            params: vec![ParamValue::Int(42), bytes(b"abc"), ParamValue::Null],
        }
    );
    assert_eq!(
        types,
        vec![
            (T::MYSQL_TYPE_LONGLONG, false),
            (T::MYSQL_TYPE_VAR_STRING, false),
            (T::MYSQL_TYPE_LONG, true),
        ]
    );
    // Second execute: no types, the kept ones apply; param 1 NULL now.
    let mut p = exec_header(9);
    p.push(0b0000_0010);
    p.push(0);
    p.extend_from_slice(&(-7i64).to_le_bytes());
    p.extend_from_slice(&u32::MAX.to_le_bytes());
    let req = parse_execute(&p, 3, &mut types, &mut no_long_data()).unwrap();
    assert_eq!(
        req.params,
        vec![
            ParamValue::Int(-7),
            ParamValue::Null,
            ParamValue::UInt(4_294_967_295)
        ]
    );
    assert_eq!(types.len(), 3);
    // Types missing on a first execute.
    let mut fresh = Vec::new();
    assert_eq!(
        parse_execute(&p, 3, &mut fresh, &mut no_long_data()),
        Err(BinaryError::MissingParamTypes {
            expected: 3,
            known: 0
        })
    );
    // Kept types for another parameter count.
    let mut two = vec![(T::MYSQL_TYPE_LONG, false); 2];
    assert!(matches!(
        parse_execute(&p, 3, &mut two, &mut no_long_data()),
        Err(BinaryError::MissingParamTypes { .. })
    ));
}

#[test]
fn execute_without_params_and_cursor_flags() {
    let mut p = exec_header(0xDEAD_BEEF);
    p[4] = 1; // CURSOR_TYPE_READ_ONLY
    let mut types = Vec::new();
    let req = parse_execute(&p, 0, &mut types, &mut no_long_data()).unwrap();
    assert_eq!(req.statement_id, 0xDEAD_BEEF);
    assert_eq!(req.cursor_flags, 1);
    assert!(req.params.is_empty());
    p.push(0);
    assert_eq!(
        parse_execute(&p, 0, &mut types, &mut no_long_data()),
        Err(BinaryError::TrailingBytes { extra: 1 })
    );
    assert_eq!(
        parse_execute(&p[..3], 0, &mut types, &mut no_long_data()),
        Err(BinaryError::Truncated {
            what: "statement id"
        })
    );
}

/// A one-parameter execute with the given type, flag and value bytes.
fn one_param(t: u8, flag: u8, value: &[u8]) -> Vec<u8> {
    let mut p = exec_header(1);
    p.extend_from_slice(&[0, 1, t, flag]);
    p.extend_from_slice(value);
    p
}

fn parse_one(t: ColumnType, unsigned: bool, value: &[u8]) -> Result<ParamValue, BinaryError> {
    let p = one_param(t as u8, if unsigned { 0x80 } else { 0 }, value);
    let mut types = Vec::new();
    let mut req = parse_execute(&p, 1, &mut types, &mut no_long_data())?;
    assert_eq!(types, [(t, unsigned)]);
    Ok(req.params.remove(0))
}

#[test]
fn execute_integer_and_float_values() {
    use ParamValue as P;
    assert_eq!(
        parse_one(T::MYSQL_TYPE_TINY, false, &[0xFF]),
        Ok(P::Int(-1))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_TINY, true, &[0xFF]),
        Ok(P::UInt(255))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_SHORT, false, &[0x00, 0x80]),
        Ok(P::Int(-32768))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_YEAR, true, &2024u16.to_le_bytes()),
        Ok(P::UInt(2024))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_LONG, false, &(-5i32).to_le_bytes()),
        Ok(P::Int(-5))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_INT24, false, &(-8_388_608i32).to_le_bytes()),
        Ok(P::Int(-8_388_608))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_LONGLONG, false, &i64::MIN.to_le_bytes()),
        Ok(P::Int(i64::MIN))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_LONGLONG, true, &u64::MAX.to_le_bytes()),
        Ok(P::UInt(u64::MAX))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_FLOAT, false, &1.1f32.to_le_bytes()),
        Ok(P::Float(f64::from(1.1f32)))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_DOUBLE, false, &(-0.1f64).to_le_bytes()),
        Ok(P::Float(-0.1))
    );
    assert_eq!(parse_one(T::MYSQL_TYPE_NULL, false, b""), Ok(P::Null));
}

#[test]
fn execute_string_values() {
    use ParamValue as P;
    assert_eq!(
        parse_one(T::MYSQL_TYPE_NEWDECIMAL, false, b"\x06-12.50"),
        Ok(P::Decimal("-12.50".into()))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_DECIMAL, false, b"\x041e10"),
        Ok(P::Decimal("1e10".into()))
    );
    // DECIMAL text that is not a number is refused, never spliced.
    for junk in [&b"\x081); DROP"[..], b"\x00", b"\x030x1", b"\x02\\'"] {
        assert!(
            matches!(
                parse_one(T::MYSQL_TYPE_NEWDECIMAL, false, junk),
                Err(BinaryError::BadParam { index: 0, .. })
            ),
            "{junk:?}"
        );
    }
    assert_eq!(
        parse_one(T::MYSQL_TYPE_BLOB, false, b"\x02\x00\xFF"),
        Ok(P::Bytes {
            data: vec![0, 0xFF],
            binary: true
        })
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_STRING, false, b"\x00"),
        Ok(bytes(b""))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_JSON, false, b"\x02{}"),
        Ok(bytes(b"{}"))
    );
    let mut long = vec![0xFC, 0x2C, 0x01];
    long.extend_from_slice(&[b'q'; 300]);
    assert_eq!(
        parse_one(T::MYSQL_TYPE_VARCHAR, false, &long),
        Ok(bytes(&[b'q'; 300]))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_VARCHAR, false, b"\xFB"),
        Err(BinaryError::ParamTruncated { index: 0 })
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_VARCHAR, false, b"\x05abc"),
        Err(BinaryError::ParamTruncated { index: 0 })
    );
    // Decimal text: [+-]digits[.digits][e[+-]digits] only.
    for (text, plain) in [
        ("1", true),
        ("-1.5", true),
        ("+.5", true),
        ("5.", true),
        ("1e5", true),
        ("-1.5E-7", true),
        ("2e+10", true),
        ("", false),
        (".", false),
        ("-", false),
        ("e5", false),
        ("1e", false),
        ("1e+", false),
        ("1e5.5", false),
        ("1.2.3", false),
        ("1 ", false),
        (" 1", false),
        ("0x10", false),
        ("--1", false),
        ("1'", false),
        ("1\\", false),
        ("\u{661}", false),
    ] {
        assert_eq!(is_decimal_text(text.as_bytes()), plain, "{text:?}");
    }
}

#[test]
fn execute_temporal_values() {
    assert_eq!(
        parse_one(T::MYSQL_TYPE_DATETIME, false, &[0]),
        Ok(date(0, 0, 0, 0, 0, 0, 0))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_DATE, false, &[4, 0xE8, 0x07, 2, 29]),
        Ok(date(2024, 2, 29, 0, 0, 0, 0))
    );
    assert_eq!(
        parse_one(
            T::MYSQL_TYPE_TIMESTAMP,
            false,
            &[7, 0xE8, 0x07, 2, 29, 1, 2, 3]
        ),
        Ok(date(2024, 2, 29, 1, 2, 3, 0))
    );
    let mut v = vec![11, 0xE8, 0x07, 2, 29, 1, 2, 3];
    v.extend_from_slice(&999_999u32.to_le_bytes());
    assert_eq!(
        parse_one(T::MYSQL_TYPE_DATETIME, false, &v),
        Ok(date(2024, 2, 29, 1, 2, 3, 999_999))
    );
    v.truncate(8);
    v.extend_from_slice(&1_000_000u32.to_le_bytes());
    assert_eq!(
        parse_one(T::MYSQL_TYPE_DATETIME, false, &v),
        Err(BinaryError::BadParam {
            index: 0,
            reason: "microseconds above 999999"
        })
    );
    assert!(matches!(
        parse_one(T::MYSQL_TYPE_DATETIME, false, &[5, 0, 0, 0, 0, 0]),
        Err(BinaryError::BadParam { index: 0, .. })
    ));
    assert_eq!(
        parse_one(T::MYSQL_TYPE_TIME, false, &[0]),
        Ok(time(false, 0, 0, 0, 0, 0))
    );
    assert_eq!(
        parse_one(T::MYSQL_TYPE_TIME, false, &[8, 1, 1, 0, 0, 0, 2, 3, 4]),
        Ok(time(true, 1, 2, 3, 4, 0))
    );
    assert_eq!(
        parse_one(
            T::MYSQL_TYPE_TIME,
            false,
            &[12, 1, 1, 0, 0, 0, 2, 3, 4, 5, 0, 0, 0]
        ),
        Ok(time(true, 1, 2, 3, 4, 5))
    );
    assert!(matches!(
        parse_one(T::MYSQL_TYPE_TIME, false, &[7, 0, 0, 0, 0, 0, 0, 0]),
        Err(BinaryError::BadParam { .. })
    ));
}

#[test]
fn execute_rejects_unbindable_types() {
    for t in [0x11u8, 0x12, 0x13, 0x14, 0xF3, 0x30, 0xF4] {
        let p = one_param(t, 0, &[0; 8]);
        let mut types = vec![(T::MYSQL_TYPE_LONG, false)];
        assert_eq!(
            parse_execute(&p, 1, &mut types, &mut no_long_data()),
            Err(BinaryError::UnknownParamType {
                index: 0,
                type_byte: t
            }),
            "type 0x{t:02x}"
        );
        assert_eq!(types, [(T::MYSQL_TYPE_LONG, false)], "types kept");
    }
}

#[test]
fn execute_long_data() {
    // p0 VARCHAR (long data; its NULL bit is set too: long data wins),
    // p1 BLOB (long data), p2 LONG 5, p3 VARCHAR NULL.
    let mut p = exec_header(3);
    p.push(0b0000_1001);
    p.push(1);
    for t in [
        T::MYSQL_TYPE_VAR_STRING,
        T::MYSQL_TYPE_BLOB,
        T::MYSQL_TYPE_LONG,
        T::MYSQL_TYPE_VAR_STRING,
    ] {
        p.extend_from_slice(&[t as u8, 0]);
    }
    p.extend_from_slice(&5i32.to_le_bytes());
    let mut long_data = HashMap::new();
    long_data.insert(0u16, b"long text".to_vec());
    long_data.insert(1u16, vec![0xFF, 0x00]);
    long_data.insert(9u16, b"no such parameter: ignored".to_vec());
    let req = parse_execute(&p, 4, &mut Vec::new(), &mut long_data).unwrap();
    assert_eq!(
        req.params,
        vec![
            bytes(b"long text"),
            ParamValue::Bytes {
                data: vec![0xFF, 0x00],
                binary: true
            },
            ParamValue::Int(5),
            ParamValue::Null,
        ]
    );
}

#[test]
fn execute_truncations_and_junk_never_panic() {
    let mut p = exec_header(77);
    p.extend_from_slice(&[0b0000_0100, 0]);
    p.push(1);
    let kinds = [
        (T::MYSQL_TYPE_LONGLONG, 0x80),
        (T::MYSQL_TYPE_VAR_STRING, 0),
        (T::MYSQL_TYPE_NULL, 0),
        (T::MYSQL_TYPE_DATETIME, 0),
        (T::MYSQL_TYPE_TIME, 0),
        (T::MYSQL_TYPE_DOUBLE, 0),
        (T::MYSQL_TYPE_TINY, 0),
        (T::MYSQL_TYPE_NEWDECIMAL, 0),
        (T::MYSQL_TYPE_FLOAT, 0),
    ];
    for (t, f) in kinds {
        p.extend_from_slice(&[t as u8, f]);
    }
    p.extend_from_slice(&u64::MAX.to_le_bytes());
    write_lenenc_bytes(&mut p, &[b'z'; 260]);
    p.extend_from_slice(&[11, 0xE8, 0x07, 2, 29, 1, 2, 3, 1, 0, 0, 0]);
    p.extend_from_slice(&[12, 1, 1, 0, 0, 0, 2, 3, 4, 5, 0, 0, 0]);
    p.extend_from_slice(&2.5f64.to_le_bytes());
    p.push(0x80);
    write_lenenc_bytes(&mut p, b"3.14");
    p.extend_from_slice(&0.5f32.to_le_bytes());
    let n = kinds.len();
    let good = parse_execute(&p, n, &mut Vec::new(), &mut no_long_data()).unwrap();
    assert_eq!(good.params.len(), n);
    assert_eq!(good.params[2], ParamValue::Null);
    assert_eq!(good.params[6], ParamValue::Int(-128));
    assert_eq!(good.params[7], ParamValue::Decimal("3.14".into()));
    assert_eq!(good.params[8], ParamValue::Float(0.5));
    let types_end = 9 + 2 + 1 + 2 * n;
    let sentinel = vec![(T::MYSQL_TYPE_BIT, true); n];
    for cut in 0..p.len() {
        let mut types = sentinel.clone();
        let result = parse_execute(&p[..cut], n, &mut types, &mut no_long_data());
        assert!(result.is_err(), "cut {cut}");
        if cut < types_end {
            assert_eq!(types, sentinel, "types kept when cut at {cut}");
        }
    }
    let mut rng = Lcg(1);
    for round in 0..5000 {
        let mut fuzzed = p.clone();
        for _ in 0..1 + round % 3 {
            let at = usize::from(rng.next()) % fuzzed.len();
            fuzzed[at] = rng.next();
        }
        let mut types = Vec::new();
        let _ = parse_execute(&fuzzed, n, &mut types, &mut no_long_data());
        let junk: Vec<u8> = (0..round % 80).map(|_| rng.next()).collect();
        let _ = parse_execute(&junk, round % 20, &mut types, &mut no_long_data());
    }
    // An absurd parameter count is an error, not a huge allocation.
    assert!(parse_execute(&p, usize::MAX, &mut Vec::new(), &mut no_long_data()).is_err());
}

/// COM_STMT_EXECUTE as mysql_common serialises it, without the command byte.
fn mysql_common_execute(stmt: u32, params: &[Value]) -> (Vec<u8>, bool) {
    let (request, as_long_data) = ComStmtExecuteRequestBuilder::new(stmt).build(params);
    let mut buf = Vec::new();
    request.serialize(&mut buf);
    assert_eq!(buf[0], Command::COM_STMT_EXECUTE as u8);
    (buf[1..].to_vec(), as_long_data)
}

fn to_param(v: &Value) -> ParamValue {
    match v.clone() {
        Value::NULL => ParamValue::Null,
        Value::Bytes(data) => ParamValue::Bytes {
            data,
            binary: false,
        },
        Value::Int(i) => ParamValue::Int(i),
        Value::UInt(u) => ParamValue::UInt(u),
        Value::Float(f) => ParamValue::Float(f64::from(f)),
        Value::Double(d) => ParamValue::Float(d),
        Value::Date(year, month, day, hour, minute, second, micros) => ParamValue::Date(DateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            micros,
        }),
        Value::Time(negative, days, hours, minutes, seconds, micros) => ParamValue::Time(Time {
            negative,
            days,
            hours,
            minutes,
            seconds,
            micros,
        }),
    }
}

#[test]
fn reads_mysql_common_execute_requests() {
    let values = vec![
        Value::Int(-42),
        Value::UInt(u64::MAX),
        Value::NULL,
        Value::Bytes("h\u{e9}llo \u{1F600}".as_bytes().to_vec()),
        Value::Float(1.1),
        Value::Double(-0.25),
        Value::Date(2024, 2, 29, 13, 14, 15, 123_456),
        Value::Date(2024, 2, 29, 13, 14, 15, 0),
        Value::Date(2024, 2, 29, 0, 0, 0, 0),
        Value::Date(0, 0, 0, 0, 0, 0, 0),
        Value::Time(true, 1, 2, 3, 4, 5),
        Value::Time(false, 0, 10, 0, 0, 0),
        Value::Time(false, 0, 0, 0, 0, 0),
        Value::Bytes(Vec::new()),
    ];
    let (payload, as_long_data) = mysql_common_execute(5, &values);
    assert!(!as_long_data);
    let mut types = Vec::new();
    let req = parse_execute(&payload, values.len(), &mut types, &mut no_long_data()).unwrap();
    assert_eq!(req.statement_id, 5);
    assert_eq!(req.cursor_flags, 0);
    let expected: Vec<ParamValue> = values.iter().map(to_param).collect();
    assert_eq!(req.params, expected);
    assert_eq!(types[1], (T::MYSQL_TYPE_LONGLONG, true));
    assert_eq!(types[2].0, T::MYSQL_TYPE_NULL);
    // The same values with the new-params-bound flag cleared and the
    // types left out: the kept types apply.
    let mut again = payload.clone();
    let flag_at = 9 + values.len().div_ceil(8);
    assert_eq!(again[flag_at], 1);
    again[flag_at] = 0;
    again.drain(flag_at + 1..flag_at + 1 + 2 * values.len());
    let req2 = parse_execute(&again, values.len(), &mut types, &mut no_long_data()).unwrap();
    assert_eq!(req2.params, expected);
}

#[test]
fn reads_mysql_common_long_data_requests() {
    // Over 16 MiB in all: mysql_common sends the byte values with
    // COM_STMT_SEND_LONG_DATA and leaves them out of the execute packet.
    let big = vec![b'a'; 1 << 24];
    let values = vec![
        Value::Int(1),
        Value::Bytes(big.clone()),
        Value::Bytes(b"x".to_vec()),
    ];
    let (payload, as_long_data) = mysql_common_execute(8, &values);
    assert!(as_long_data);
    assert!(payload.len() < 64);
    let mut long_data = HashMap::new();
    long_data.insert(1u16, big.clone());
    long_data.insert(2u16, b"x".to_vec());
    let req = parse_execute(&payload, 3, &mut Vec::new(), &mut long_data).unwrap();
    assert_eq!(req.params[0], ParamValue::Int(1));
    assert_eq!(req.params[1], bytes(&big));
    assert_eq!(req.params[2], bytes(b"x"));
}
