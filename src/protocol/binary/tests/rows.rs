//! Text rows converted to binary rows: numbers, strings, NULL bitmap, temporal values, row shape.

use super::*;

#[test]
fn tiny_signed_and_unsigned() {
    assert_eq!(one(col(T::MYSQL_TYPE_TINY), "-128").unwrap(), [0x80]);
    assert_eq!(one(col(T::MYSQL_TYPE_TINY), "127").unwrap(), [0x7F]);
    assert_eq!(one(col(T::MYSQL_TYPE_TINY), "-1").unwrap(), [0xFF]);
    assert_eq!(one(ucol(T::MYSQL_TYPE_TINY), "255").unwrap(), [0xFF]);
    assert_eq!(one(ucol(T::MYSQL_TYPE_TINY), "0").unwrap(), [0x00]);
    for (c, text) in [
        (col(T::MYSQL_TYPE_TINY), "128"),
        (col(T::MYSQL_TYPE_TINY), "-129"),
        (ucol(T::MYSQL_TYPE_TINY), "256"),
        (ucol(T::MYSQL_TYPE_TINY), "-1"),
        (col(T::MYSQL_TYPE_TINY), ""),
        (col(T::MYSQL_TYPE_TINY), "1.0"),
        (col(T::MYSQL_TYPE_TINY), " 1"),
    ] {
        assert!(
            matches!(one(c, text), Err(BinaryError::BadNumber { column: 0, .. })),
            "{text:?}"
        );
    }
}

#[test]
fn short_year_long_int24() {
    assert_eq!(
        one(col(T::MYSQL_TYPE_SHORT), "-32768").unwrap(),
        [0x00, 0x80]
    );
    assert_eq!(
        one(ucol(T::MYSQL_TYPE_SHORT), "65535").unwrap(),
        [0xFF, 0xFF]
    );
    assert!(one(col(T::MYSQL_TYPE_SHORT), "32768").is_err());
    let year = ColumnInfo::new(T::MYSQL_TYPE_YEAR, F::UNSIGNED_FLAG | F::ZEROFILL_FLAG);
    assert_eq!(one(year, "2024").unwrap(), 2024u16.to_le_bytes());
    assert_eq!(one(year, "0000").unwrap(), [0, 0]);
    assert_eq!(one(col(T::MYSQL_TYPE_LONG), "-1").unwrap(), [0xFF; 4]);
    assert_eq!(
        one(col(T::MYSQL_TYPE_LONG), "-2147483648").unwrap(),
        i32::MIN.to_le_bytes()
    );
    assert_eq!(
        one(ucol(T::MYSQL_TYPE_LONG), "4294967295").unwrap(),
        u32::MAX.to_le_bytes()
    );
    assert!(one(col(T::MYSQL_TYPE_LONG), "2147483648").is_err());
    assert_eq!(
        one(col(T::MYSQL_TYPE_INT24), "-8388608").unwrap(),
        (-8_388_608i32).to_le_bytes()
    );
    assert_eq!(
        one(ucol(T::MYSQL_TYPE_INT24), "16777215").unwrap(),
        16_777_215u32.to_le_bytes()
    );
    // Zerofill text keeps its leading zeros.
    let zf = ColumnInfo::new(T::MYSQL_TYPE_LONG, F::UNSIGNED_FLAG | F::ZEROFILL_FLAG);
    assert_eq!(one(zf, "0000000042").unwrap(), 42u32.to_le_bytes());
}

#[test]
fn longlong_signed_and_unsigned() {
    assert_eq!(
        one(col(T::MYSQL_TYPE_LONGLONG), "-9223372036854775808").unwrap(),
        i64::MIN.to_le_bytes()
    );
    assert_eq!(
        one(col(T::MYSQL_TYPE_LONGLONG), "9223372036854775807").unwrap(),
        i64::MAX.to_le_bytes()
    );
    assert_eq!(
        one(ucol(T::MYSQL_TYPE_LONGLONG), "18446744073709551615").unwrap(),
        u64::MAX.to_le_bytes()
    );
    assert!(one(col(T::MYSQL_TYPE_LONGLONG), "18446744073709551615").is_err());
    assert!(one(ucol(T::MYSQL_TYPE_LONGLONG), "18446744073709551616").is_err());
    assert!(one(ucol(T::MYSQL_TYPE_LONGLONG), "-1").is_err());
    // Not UTF-8.
    let out = convert(&[Some(&[0xFF, 0x31])], &[col(T::MYSQL_TYPE_LONGLONG)]);
    assert!(matches!(out, Err(BinaryError::BadNumber { .. })));
}

#[test]
fn float_and_double() {
    assert_eq!(
        one(col(T::MYSQL_TYPE_FLOAT), "1.5").unwrap(),
        1.5f32.to_le_bytes()
    );
    assert_eq!(
        one(col(T::MYSQL_TYPE_FLOAT), "-3.40282e38").unwrap(),
        (-3.40282e38f32).to_le_bytes()
    );
    assert_eq!(
        one(col(T::MYSQL_TYPE_FLOAT), "0.1").unwrap(),
        0.1f32.to_le_bytes()
    );
    assert_eq!(
        one(col(T::MYSQL_TYPE_DOUBLE), "-2.5e-300").unwrap(),
        (-2.5e-300f64).to_le_bytes()
    );
    assert_eq!(
        one(col(T::MYSQL_TYPE_DOUBLE), "0.30000000000000004").unwrap(),
        (0.1f64 + 0.2).to_le_bytes()
    );
    assert_eq!(
        one(col(T::MYSQL_TYPE_DOUBLE), "1e300").unwrap(),
        1e300f64.to_le_bytes()
    );
    assert!(matches!(
        one(col(T::MYSQL_TYPE_DOUBLE), "1,5"),
        Err(BinaryError::BadNumber {
            column_type: T::MYSQL_TYPE_DOUBLE,
            ..
        })
    ));
}

#[test]
fn string_kinds_are_lenenc_copies() {
    let long = vec![b'x'; 300];
    let emoji = "h\u{e9}llo \u{1F600}".as_bytes();
    let samples: [&[u8]; 5] = [b"", b"12.50", emoji, &[0xFB, 0x00, 0xFF], &long];
    for t in [
        T::MYSQL_TYPE_DECIMAL,
        T::MYSQL_TYPE_NEWDECIMAL,
        T::MYSQL_TYPE_VARCHAR,
        T::MYSQL_TYPE_VAR_STRING,
        T::MYSQL_TYPE_STRING,
        T::MYSQL_TYPE_ENUM,
        T::MYSQL_TYPE_SET,
        T::MYSQL_TYPE_TINY_BLOB,
        T::MYSQL_TYPE_MEDIUM_BLOB,
        T::MYSQL_TYPE_LONG_BLOB,
        T::MYSQL_TYPE_BLOB,
        T::MYSQL_TYPE_JSON,
        T::MYSQL_TYPE_GEOMETRY,
        T::MYSQL_TYPE_BIT,
    ] {
        for sample in samples {
            let out = convert(&[Some(sample)], &[col(t)]).unwrap();
            let mut expected = vec![0x00, 0x00];
            write_lenenc_bytes(&mut expected, sample);
            assert_eq!(out, expected, "{t:?}");
        }
    }
    // 300 bytes need the 0xFC length form.
    let out = convert(&[Some(&long)], &[col(T::MYSQL_TYPE_BLOB)]).unwrap();
    assert_eq!(&out[2..5], &[0xFC, 0x2C, 0x01]);
}

// ----- NULL bitmap -----

#[test]
fn null_bitmap_has_offset_two() {
    let c = col(T::MYSQL_TYPE_LONG);
    let one_v: &[u8] = b"1";
    let mut values = [Some(one_v); 10];
    for i in [0, 5, 6, 9] {
        values[i] = None;
    }
    let out = convert(&values, &[c; 10]).unwrap();
    // bits 2, 7, 8, 11
    assert_eq!(&out[..3], &[0x00, 0x84, 0x09]);
    assert_eq!(out.len(), 3 + 6 * 4);
    for chunk in out[3..].chunks(4) {
        assert_eq!(chunk, 1i32.to_le_bytes());
    }
    // Bitmap sizes: (n + 9) / 8, one bit per NULL.
    for (n, len) in [(0, 1), (1, 1), (6, 1), (7, 2), (14, 2), (15, 3)] {
        let columns = vec![c; n];
        let values = vec![None; n];
        let out = convert(&values, &columns).unwrap();
        assert_eq!(out.len(), 1 + len, "{n} columns");
        let set: u32 = out[1..].iter().map(|b| b.count_ones()).sum();
        assert_eq!(set as usize, n);
    }
    // The 7th column's bit is the first of the second byte.
    let mut values = vec![Some(one_v); 7];
    values[6] = None;
    let out = convert(&values, &[c; 7]).unwrap();
    assert_eq!(&out[..3], &[0x00, 0x00, 0x01]);
    // Only the first column NULL.
    let out = convert(&[None, Some(one_v)], &[c; 2]).unwrap();
    assert_eq!(out, [0x00, 0x04, 1, 0, 0, 0]);
}

#[test]
fn null_type_column_is_always_null() {
    let columns = [col(T::MYSQL_TYPE_NULL), col(T::MYSQL_TYPE_LONGLONG)];
    let out = convert(&[None, Some(b"7")], &columns).unwrap();
    assert_eq!(&out[..2], &[0x00, 0x04]);
    assert_eq!(&out[2..], 7i64.to_le_bytes());
    let out = convert(&[Some(b"x"), Some(b"7")], &columns).unwrap();
    assert_eq!(&out[..2], &[0x00, 0x04]);
    assert_eq!(out.len(), 10);
}

// ----- temporal -----

#[test]
fn dates_and_datetimes() {
    let date = col(T::MYSQL_TYPE_DATE);
    let dt = ColumnInfo {
        decimals: 6,
        ..col(T::MYSQL_TYPE_DATETIME)
    };
    let ts = col(T::MYSQL_TYPE_TIMESTAMP);
    assert_eq!(one(date, "0000-00-00").unwrap(), [0]);
    assert_eq!(one(dt, "0000-00-00 00:00:00").unwrap(), [0]);
    assert_eq!(one(dt, "0000-00-00 00:00:00.000000").unwrap(), [0]);
    assert_eq!(one(date, "2024-02-29").unwrap(), [4, 0xE8, 0x07, 2, 29]);
    assert_eq!(one(date, "2024-00-00").unwrap(), [4, 0xE8, 0x07, 0, 0]);
    assert_eq!(
        one(ts, "2024-01-01 00:00:00").unwrap(),
        [4, 0xE8, 0x07, 1, 1]
    );
    assert_eq!(
        one(dt, "2024-02-29 13:14:15").unwrap(),
        [7, 0xE8, 0x07, 2, 29, 13, 14, 15]
    );
    let mut expected = vec![11, 0xE8, 0x07, 2, 29, 13, 14, 15];
    expected.extend_from_slice(&1u32.to_le_bytes());
    assert_eq!(one(dt, "2024-02-29 13:14:15.000001").unwrap(), expected);
    // DATETIME(1) and TIMESTAMP(3) text.
    let mut expected = vec![11, 0xE8, 0x07, 2, 29, 0, 0, 0];
    expected.extend_from_slice(&500_000u32.to_le_bytes());
    assert_eq!(one(dt, "2024-02-29 00:00:00.5").unwrap(), expected);
    let mut expected = vec![11, 0x0F, 0x27, 12, 31, 23, 59, 59];
    expected.extend_from_slice(&123_000u32.to_le_bytes());
    assert_eq!(one(ts, "9999-12-31 23:59:59.123").unwrap(), expected);
    for bad in [
        "2024-1-01",
        "24-01-01",
        "2024/01/01",
        "abcd-ef-gh",
        "2024-01-01 1:02:03",
        "2024-01-01 01:02",
        "2024-01-01 01:02:03.",
        "2024-01-01 01:02:03.1234567",
        "2024-01-01 01:02:03.12a",
        "2024-01-01T01:02:03",
        "2024-01-01 ",
        "2024-01-01 -1:02:03",
        "+024-01-01",
        "",
    ] {
        assert!(
            matches!(one(dt, bad), Err(BinaryError::BadDate { column: 0, .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn times() {
    let time = ColumnInfo {
        decimals: 6,
        ..col(T::MYSQL_TYPE_TIME)
    };
    assert_eq!(one(time, "00:00:00").unwrap(), [0]);
    assert_eq!(one(time, "00:00:00.000000").unwrap(), [0]);
    assert_eq!(one(time, "01:02:03").unwrap(), [8, 0, 0, 0, 0, 0, 1, 2, 3]);
    assert_eq!(
        one(time, "-838:59:59").unwrap(),
        [8, 1, 34, 0, 0, 0, 22, 59, 59]
    );
    let mut expected = vec![12, 0, 1, 0, 0, 0, 2, 3, 4];
    expected.extend_from_slice(&5u32.to_le_bytes());
    assert_eq!(one(time, "26:03:04.000005").unwrap(), expected);
    let mut expected = vec![12, 1, 1, 0, 0, 0, 2, 3, 4];
    expected.extend_from_slice(&5u32.to_le_bytes());
    assert_eq!(one(time, "-26:03:04.000005").unwrap(), expected);
    let mut expected = vec![12, 1, 0, 0, 0, 0, 0, 0, 1];
    expected.extend_from_slice(&500_000u32.to_le_bytes());
    assert_eq!(one(time, "-00:00:01.5").unwrap(), expected);
    assert_eq!(one(time, "5:00:00").unwrap(), [8, 0, 0, 0, 0, 0, 5, 0, 0]);
    for bad in [
        "",
        "-",
        "12:00",
        "12:0:00",
        "1a:00:00",
        ":00:00",
        "--1:00:00",
        "+1:00:00",
        "01:02:03.1234567",
        "1234567890:00:00",
        "01:02:03 ",
        "1 01:02:03",
    ] {
        assert!(
            matches!(one(time, bad), Err(BinaryError::BadTime { column: 0, .. })),
            "{bad:?}"
        );
    }
}

// ----- row shape and errors -----

#[test]
fn row_shape_errors() {
    let columns = [col(T::MYSQL_TYPE_VAR_STRING); 3];
    assert_eq!(
        convert(&[Some(b"a"), None], &columns),
        Err(BinaryError::RowTooShort {
            expected: 3,
            found: 2
        })
    );
    assert_eq!(
        convert(&[Some(b"a"), None, None, Some(b"b")], &columns),
        Err(BinaryError::RowTooLong {
            columns: 3,
            extra: 2
        })
    );
    let mut out = Vec::new();
    // A length that runs past the end.
    assert_eq!(
        text_row_to_binary(&[0x05, b'a', b'b'], &columns[..1], &mut out),
        Err(BinaryError::RowTruncated { column: 0 })
    );
    // 0xFF is not a length.
    assert_eq!(
        text_row_to_binary(&[0xFF], &columns[..1], &mut out),
        Err(BinaryError::RowTruncated { column: 0 })
    );
    // A huge 8-byte length.
    let huge = [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
    assert_eq!(
        text_row_to_binary(&huge, &columns[..1], &mut out),
        Err(BinaryError::RowTruncated { column: 0 })
    );
    assert!(out.is_empty());
    assert_eq!(
        convert(&[Some(b"x")], &[col(T::MYSQL_TYPE_TIME2)]),
        Err(BinaryError::UnsupportedColumnType {
            column: 0,
            column_type: T::MYSQL_TYPE_TIME2
        })
    );
    // No columns: header and a one-byte bitmap.
    assert_eq!(convert(&[], &[]), Ok(vec![0x00, 0x00]));
}

#[test]
fn output_is_appended_and_restored_on_error() {
    let columns = [col(T::MYSQL_TYPE_LONG), col(T::MYSQL_TYPE_LONG)];
    let mut out = vec![0xAA, 0xBB];
    text_row_to_binary(&text_row(&[Some(b"1"), None]), &columns, &mut out).unwrap();
    assert_eq!(out, [0xAA, 0xBB, 0x00, 0x08, 1, 0, 0, 0]);
    let err = text_row_to_binary(&text_row(&[Some(b"1"), Some(b"x")]), &columns, &mut out);
    assert!(matches!(err, Err(BinaryError::BadNumber { column: 1, .. })));
    assert_eq!(out, [0xAA, 0xBB, 0x00, 0x08, 1, 0, 0, 0]);
    // Offending text is shortened in the error.
    let long = vec![b'9'; 1000];
    match convert(&[Some(b"1"), Some(&long)], &columns) {
        Err(BinaryError::BadNumber { text, .. }) => assert_eq!(text.len(), ERROR_TEXT_MAX),
        other => panic!("{other:?}"),
    }
}

fn mixed_columns() -> Vec<ColumnInfo> {
    vec![
        col(T::MYSQL_TYPE_TINY),
        ucol(T::MYSQL_TYPE_SHORT),
        col(T::MYSQL_TYPE_LONG),
        ucol(T::MYSQL_TYPE_LONGLONG),
        col(T::MYSQL_TYPE_FLOAT),
        col(T::MYSQL_TYPE_DOUBLE),
        col(T::MYSQL_TYPE_NEWDECIMAL),
        col(T::MYSQL_TYPE_VAR_STRING),
        col(T::MYSQL_TYPE_DATETIME),
        col(T::MYSQL_TYPE_TIME),
        col(T::MYSQL_TYPE_NULL),
    ]
}

#[test]
fn text_row_truncations_and_junk_never_panic() {
    let columns = mixed_columns();
    let row = text_row(&[
        Some(b"-5"),
        Some(b"65535"),
        None,
        Some(b"18446744073709551615"),
        Some(b"1.5"),
        Some(b"-0.25"),
        Some(b"12.50"),
        Some("\u{1F600}".as_bytes()),
        Some(b"2024-02-29 13:14:15.5"),
        Some(b"-26:03:04.000005"),
        None,
    ]);
    let mut out = Vec::new();
    text_row_to_binary(&row, &columns, &mut out).unwrap();
    for cut in 0..row.len() {
        out.clear();
        assert!(
            text_row_to_binary(&row[..cut], &columns, &mut out).is_err(),
            "cut {cut}"
        );
        assert!(out.is_empty());
    }
    let mut rng = Lcg(42);
    for round in 0..3000 {
        let mut fuzzed = row.clone();
        for _ in 0..1 + round % 4 {
            let at = usize::from(rng.next()) % fuzzed.len();
            fuzzed[at] = rng.next();
        }
        let _ = text_row_to_binary(&fuzzed, &columns, &mut out);
        let junk: Vec<u8> = (0..round % 64).map(|_| rng.next()).collect();
        let _ = text_row_to_binary(&junk, &columns, &mut out);
    }
}

/// Converted rows read back by mysql_common's binary-row parser, with the
/// column definitions it serialises read by `parse_column_definition`.
#[test]
fn binary_rows_read_back_by_mysql_common() {
    let infos = mixed_columns();
    let columns: Arc<[Column]> = infos
        .iter()
        .map(|c| {
            let column = Column::new(c.column_type).with_flags(c.flags);
            let mut p = Vec::new();
            column.serialize(&mut p);
            let parsed = parse_column_definition(&p);
            assert_eq!(parsed, Some(ColumnInfo { charset: 0, ..*c }));
            column
        })
        .collect();
    let emoji = "h\u{e9}llo \u{1F600}".as_bytes();
    let rows: Vec<(TextValues, Vec<Value>)> = vec![
        (
            vec![
                Some(b"-5"),
                Some(b"65535"),
                Some(b"-2147483648"),
                Some(b"18446744073709551615"),
                Some(b"1.5"),
                Some(b"-0.25"),
                Some(b"12.50"),
                Some(emoji),
                Some(b"2024-02-29 13:14:15.5"),
                Some(b"-26:03:04.000005"),
                None,
            ],
            vec![
                Value::Int(-5),
                Value::Int(65535),
                Value::Int(-2147483648),
                Value::UInt(u64::MAX),
                Value::Float(1.5),
                Value::Double(-0.25),
                Value::Bytes(b"12.50".to_vec()),
                Value::Bytes(emoji.to_vec()),
                Value::Date(2024, 2, 29, 13, 14, 15, 500_000),
                Value::Time(true, 1, 2, 3, 4, 5),
                Value::NULL,
            ],
        ),
        (
            vec![
                None,
                Some(b"0"),
                None,
                Some(b"0"),
                None,
                Some(b"1e300"),
                None,
                Some(b""),
                Some(b"0000-00-00 00:00:00"),
                Some(b"00:00:00"),
                None,
            ],
            vec![
                Value::NULL,
                Value::Int(0),
                Value::NULL,
                Value::Int(0),
                Value::NULL,
                Value::Double(1e300),
                Value::NULL,
                Value::Bytes(Vec::new()),
                Value::Date(0, 0, 0, 0, 0, 0, 0),
                Value::Time(false, 0, 0, 0, 0, 0),
                Value::NULL,
            ],
        ),
        (
            vec![
                Some(b"127"),
                None,
                Some(b"7"),
                None,
                Some(b"-1e-3"),
                None,
                Some(b"-0.001"),
                None,
                Some(b"1999-12-31 23:59:59"),
                Some(b"838:59:59"),
                None,
            ],
            vec![
                Value::Int(127),
                Value::NULL,
                Value::Int(7),
                Value::NULL,
                Value::Float(-1e-3),
                Value::NULL,
                Value::Bytes(b"-0.001".to_vec()),
                Value::NULL,
                Value::Date(1999, 12, 31, 23, 59, 59, 0),
                Value::Time(false, 34, 22, 59, 59, 0),
                Value::NULL,
            ],
        ),
    ];
    for (text, expected) in rows {
        let binary = convert(&text, &infos).unwrap();
        let mut buf = ParseBuf(&binary);
        let row = RowDeserializer::<ServerSide, Binary>::deserialize(columns.clone(), &mut buf)
            .expect("mysql_common reads the row");
        assert!(buf.is_empty(), "row fully consumed");
        assert_eq!(row.into_inner().unwrap(), expected);
    }
}

#[test]
fn binary_rows_split_into_values_and_back_unchanged() {
    let infos = [
        col(T::MYSQL_TYPE_TINY),
        ucol(T::MYSQL_TYPE_LONGLONG),
        col(T::MYSQL_TYPE_FLOAT),
        col(T::MYSQL_TYPE_DOUBLE),
        col(T::MYSQL_TYPE_NEWDECIMAL),
        col(T::MYSQL_TYPE_DATETIME),
        col(T::MYSQL_TYPE_TIME),
        col(T::MYSQL_TYPE_BLOB),
        col(T::MYSQL_TYPE_VAR_STRING),
    ];
    let text: TextValues = vec![
        Some(b"-5"),
        Some(b"18446744073709551615"),
        Some(b"16777215"),
        None,
        Some(b"-12.50"),
        Some(b"2024-02-29 23:59:58.123456"),
        Some(b"-26:03:04.5"),
        Some(b"\x00\xff"),
        Some(b""),
    ];
    let row = convert(&text, &infos).unwrap();
    let values = binary_row_values(&row, &infos).unwrap();
    assert_eq!(values[0], Some(vec![0xFB]));
    assert_eq!(values[2], Some(16_777_215f32.to_le_bytes().to_vec()));
    assert_eq!(values[3], None);
    assert_eq!(
        values[4].as_deref(),
        Some(&b"-12.50"[..]),
        "DECIMAL is its text"
    );
    assert_eq!(
        values[5].as_ref().map(Vec::len),
        Some(12),
        "length byte kept"
    );
    assert_eq!(
        values[7].as_deref(),
        Some(&b"\x00\xff"[..]),
        "no length prefix"
    );
    assert_eq!(values[8].as_deref(), Some(&b""[..]));
    let mut again = Vec::new();
    write_binary_values(&values, &infos, &mut again).unwrap();
    assert_eq!(again, row);

    let scalar = |i: usize| binary_scalar(values[i].as_deref().unwrap(), &infos[i]);
    assert_eq!(scalar(0), Some(BinaryScalar::Int(-5)));
    assert_eq!(scalar(1), Some(BinaryScalar::Int(i128::from(u64::MAX))));
    assert_eq!(scalar(2), Some(BinaryScalar::Real(16_777_215.0)));
    assert_eq!(scalar(4), None, "DECIMAL compares as text");
    assert_eq!(
        scalar(6),
        Some(BinaryScalar::Instant(
            -(26 * 3600 + 3 * 60 + 4) * 1_000_000 - 500_000
        ))
    );
    let earlier = convert(&[Some(b"2024-02-29 23:59:58.123455")], &infos[5..6]).unwrap();
    let earlier = binary_row_values(&earlier, &infos[5..6]).unwrap();
    match (
        scalar(5),
        binary_scalar(earlier[0].as_deref().unwrap(), &infos[5]),
    ) {
        (Some(BinaryScalar::Instant(later)), Some(BinaryScalar::Instant(before))) => {
            assert_eq!(later - before, 1)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        number_text_to_binary(b"7", &infos[1]).unwrap(),
        7u64.to_le_bytes().to_vec()
    );

    for bad in [&row[..row.len() - 1], &[0x00][..], &[][..]] {
        assert!(binary_row_values(bad, &infos).is_err(), "{bad:?}");
    }
    let mut longer = row.clone();
    longer.push(0);
    assert!(matches!(
        binary_row_values(&longer, &infos),
        Err(BinaryError::RowTooLong { extra: 1, .. })
    ));
}
