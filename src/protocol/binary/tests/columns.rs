//! Column definitions.

use super::*;

#[test]
fn column_definition_from_mysql_common() {
    let column = Column::new(T::MYSQL_TYPE_NEWDECIMAL)
        .with_schema(b"db00001")
        .with_table(b"pins")
        .with_org_table(b"pins")
        .with_name(b"price")
        .with_org_name(b"price")
        .with_flags(F::UNSIGNED_FLAG | F::NOT_NULL_FLAG)
        .with_column_length(12)
        .with_character_set(33)
        .with_decimals(2);
    let mut payload = Vec::new();
    column.serialize(&mut payload);
    let info = parse_column_definition(&payload).expect("parses");
    // mysql_common 0.37 serialises column_length before character_set
    // (the protocol has them the other way round, as its own parser
    // reads them): compare with what that parser reads back.
    let back = Column::deserialize((), &mut ParseBuf(&payload)).expect("round trip");
    assert_eq!(
        info,
        ColumnInfo {
            column_type: back.column_type(),
            flags: back.flags(),
            decimals: back.decimals(),
            charset: back.character_set(),
        }
    );
    assert_eq!(info.column_type, T::MYSQL_TYPE_NEWDECIMAL);
    assert_eq!(info.flags, F::UNSIGNED_FLAG | F::NOT_NULL_FLAG);
    assert_eq!(info.decimals, 2);
    assert!(info.is_unsigned());
    // Every truncation before the decimals byte fails cleanly.
    for cut in 0..payload.len() - 2 {
        assert_eq!(parse_column_definition(&payload[..cut]), None, "cut {cut}");
    }
    // An unknown type byte is refused.
    let type_at = payload.len() - 6;
    assert_eq!(payload[type_at], T::MYSQL_TYPE_NEWDECIMAL as u8);
    payload[type_at] = 0x30;
    assert_eq!(parse_column_definition(&payload), None);
}

#[test]
fn column_definition_handwritten_and_garbage() {
    let mut p = Vec::new();
    for s in ["def", "", "", "", "1", ""] {
        write_lenenc_bytes(&mut p, s.as_bytes());
    }
    p.push(0x0c);
    p.extend_from_slice(&63u16.to_le_bytes());
    p.extend_from_slice(&1u32.to_le_bytes());
    p.push(T::MYSQL_TYPE_LONGLONG as u8);
    p.extend_from_slice(&0x0081u16.to_le_bytes());
    p.push(0);
    p.extend_from_slice(&[0, 0]);
    let info = parse_column_definition(&p).unwrap();
    assert_eq!(info.column_type, T::MYSQL_TYPE_LONGLONG);
    assert_eq!(info.flags, F::NOT_NULL_FLAG | F::BINARY_FLAG);
    assert_eq!(info.charset, 63);
    let mut rng = Lcg(7);
    for len in 0..400 {
        let junk: Vec<u8> = (0..len % 100).map(|_| rng.next()).collect();
        let _ = parse_column_definition(&junk);
    }
    assert_eq!(parse_column_definition(&[0xFE, 0xFF, 0xFF]), None);
    assert_eq!(
        parse_column_definition(&[0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
        None
    );
}
