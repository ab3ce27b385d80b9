//! The merge of a multi-shard read's parts, pure (no I/O): rows decoded
//! from the text protocol (or, for a prepared statement's execute, split
//! from the binary protocol: [`RowFormat`]), concatenated, k-way merged by
//! the sort keys, or grouped with their aggregates merged, then OFFSET and
//! LIMIT applied.
//! How values order is in `order`, the exact decimal arithmetic in
//! `decimal`.

mod decimal;
mod order;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use mysql_common::constants::{ColumnFlags, ColumnType};

use crate::protocol::binary::{binary_scalar, number_text_to_binary, BinaryScalar, ColumnInfo};
use crate::protocol::frame::read_lenenc_int;
use crate::protocol::packets::TEXT_NULL;
use crate::router::{Merge, MergeColumn, SortKey};
use decimal::add_numbers;
use order::{compare_rows, compare_values};
pub(crate) use order::{general_ci_exact, is_general_ci, is_numeric, merges_exactly};

/// One value of a row: `None` is SQL NULL.
pub(crate) type Value = Option<Vec<u8>>;

/// How a read's values are written: as text-protocol values, or as
/// binary-protocol values
/// ([`crate::protocol::binary::binary_row_values`]: a string's or a
/// DECIMAL's value is its text, a number or a time its binary bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowFormat {
    /// Text-protocol values.
    Text,
    /// Binary-protocol values.
    Binary,
}

/// The rows one part (one shard) answered.
pub(crate) type PartRows = Vec<Vec<Value>>;

/// Splits a text-protocol row into its values.
pub(crate) fn decode_text_row(mut row: &[u8], count: usize) -> Vec<Value> {
    let mut values = Vec::with_capacity(count);
    for _ in 0..count {
        if row.first() == Some(&TEXT_NULL) {
            row = &row[1..];
            values.push(None);
            continue;
        }
        let len = read_lenenc_int(&mut row).unwrap_or(0) as usize;
        let len = len.min(row.len());
        values.push(Some(row[..len].to_vec()));
        row = &row[len..];
    }
    values
}

/// The columns whose values the merge compares as text: sort keys, and
/// MIN / MAX columns, of a type that is not a number.
pub(crate) fn compared_text_columns(merge: &Merge, columns: &[ColumnInfo]) -> Vec<usize> {
    let mut compared: Vec<usize> = merge.order_by.iter().map(|key| key.column).collect();
    if let Some(aggregation) = &merge.aggregation {
        compared.extend(
            aggregation
                .columns
                .iter()
                .enumerate()
                .filter(|(_, rule)| matches!(rule, MergeColumn::Min | MergeColumn::Max))
                .map(|(i, _)| i),
        );
    }
    compared.sort_unstable();
    compared.dedup();
    compared.retain(|&i| columns.get(i).is_some_and(|c| !is_numeric(c.column_type)));
    compared
}

/// Combines the parts' rows as the plan says.
pub(crate) fn merge_rows(
    parts: Vec<PartRows>,
    columns: &[ColumnInfo],
    merge: &Merge,
    format: RowFormat,
) -> Vec<Vec<Value>> {
    let rows = match &merge.aggregation {
        Some(aggregation) => {
            let mut groups = aggregate(parts, columns, &aggregation.columns, format);
            if !merge.order_by.is_empty() {
                groups.sort_by(|a, b| compare_rows(a, b, &merge.order_by, columns, format));
            }
            groups
        }
        None if merge.order_by.is_empty() => parts.into_iter().flatten().collect(),
        None => merge_sorted(parts, columns, &merge.order_by, format),
    };
    let offset = usize::try_from(merge.offset).unwrap_or(usize::MAX);
    let limit = merge
        .limit
        .map(|l| usize::try_from(l).unwrap_or(usize::MAX))
        .unwrap_or(usize::MAX);
    rows.into_iter().skip(offset).take(limit).collect()
}

/// A row waiting in the k-way merge: the heap pops the smallest first.
struct Pending<'a> {
    row: Vec<Value>,
    part: usize,
    keys: &'a [SortKey],
    columns: &'a [ColumnInfo],
    format: RowFormat,
}

impl PartialEq for Pending<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Pending<'_> {}

impl PartialOrd for Pending<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_rows(&other.row, &self.row, self.keys, self.columns, self.format)
            .then_with(|| other.part.cmp(&self.part))
    }
}

/// Merges parts that are each sorted by `keys` into one sorted list.
fn merge_sorted(
    parts: Vec<PartRows>,
    columns: &[ColumnInfo],
    keys: &[SortKey],
    format: RowFormat,
) -> Vec<Vec<Value>> {
    let total = parts.iter().map(Vec::len).sum();
    let mut streams: Vec<_> = parts.into_iter().map(Vec::into_iter).collect();
    let mut heap = BinaryHeap::with_capacity(streams.len());
    for (part, stream) in streams.iter_mut().enumerate() {
        if let Some(row) = stream.next() {
            heap.push(Pending {
                row,
                part,
                keys,
                columns,
                format,
            });
        }
    }
    let mut merged = Vec::with_capacity(total);
    while let Some(Pending { row, part, .. }) = heap.pop() {
        merged.push(row);
        if let Some(next) = streams[part].next() {
            heap.push(Pending {
                row: next,
                part,
                keys,
                columns,
                format,
            });
        }
    }
    merged
}

/// Groups the parts' rows by their group-key columns and merges the
/// aggregate columns. Groups keep the order in which they were first seen.
fn aggregate(
    parts: Vec<PartRows>,
    columns: &[ColumnInfo],
    rules: &[MergeColumn],
    format: RowFormat,
) -> Vec<Vec<Value>> {
    let mut order: Vec<Vec<Value>> = Vec::new();
    let mut index: HashMap<Vec<Value>, usize> = HashMap::new();
    for row in parts.into_iter().flatten() {
        let key: Vec<Value> = rules
            .iter()
            .zip(&row)
            .filter(|(rule, _)| **rule == MergeColumn::GroupKey)
            .map(|(_, value)| value.clone())
            .collect();
        match index.get(&key) {
            Some(&at) => {
                let merged = &mut order[at];
                for (position, rule) in rules.iter().enumerate() {
                    let (Some(current), Some(incoming)) = (merged.get(position), row.get(position))
                    else {
                        continue;
                    };
                    let column = columns.get(position);
                    let combined = combine(*rule, current, incoming, column, format);
                    merged[position] = combined;
                }
            }
            None => {
                index.insert(key, order.len());
                order.push(row);
            }
        }
    }
    order
}

/// Merges one aggregate column's value from two parts.
fn combine(
    rule: MergeColumn,
    a: &Value,
    b: &Value,
    column: Option<&ColumnInfo>,
    format: RowFormat,
) -> Value {
    match rule {
        MergeColumn::GroupKey => a.clone(),
        MergeColumn::Count | MergeColumn::Sum => match (a, b, column) {
            (None, other, _) | (other, None, _) => other.clone(),
            (Some(x), Some(y), Some(column)) if format == RowFormat::Binary => {
                Some(add_binary(x, y, column).unwrap_or_else(|| x.clone()))
            }
            (Some(x), Some(y), _) => Some(add_numbers(x, y)),
        },
        MergeColumn::Min | MergeColumn::Max => {
            let fallback = ColumnInfo::new(ColumnType::MYSQL_TYPE_VAR_STRING, ColumnFlags::empty());
            let column = column.unwrap_or(&fallback);
            match (a, b) {
                (None, other) | (other, None) => other.clone(),
                (Some(_), Some(_)) => {
                    let ordering = compare_values(a, b, column, format);
                    let take_b = match rule {
                        MergeColumn::Min => ordering == Ordering::Greater,
                        _ => ordering == Ordering::Less,
                    };
                    if take_b {
                        b.clone()
                    } else {
                        a.clone()
                    }
                }
            }
        }
    }
}

/// Adds two binary-protocol values of a COUNT or SUM column: integers
/// exactly, FLOAT/DOUBLE as doubles, DECIMAL (text) exactly; `None` when
/// the sum has no value of the column's type.
fn add_binary(a: &[u8], b: &[u8], column: &ColumnInfo) -> Option<Vec<u8>> {
    let sum = match (binary_scalar(a, column), binary_scalar(b, column)) {
        (Some(BinaryScalar::Int(x)), Some(BinaryScalar::Int(y))) => {
            (x + y).to_string().into_bytes()
        }
        (Some(BinaryScalar::Real(x)), Some(BinaryScalar::Real(y))) => {
            (x + y).to_string().into_bytes()
        }
        (None, None) => add_numbers(a, b),
        _ => return None,
    };
    number_text_to_binary(&sum, column).ok()
}
