//! What of a TensorBuffers file's metadata zTensor has no field for, as `tensorbuffers.*` file
//! attributes, and back: what reading a file presents and what writing one restores.

use ztensor_format::{Value, text_map};

use crate::schema::Operation;

/// What of the metadata zTensor has no field for, as `tensorbuffers.*` file attributes.
pub(crate) fn kept_metadata(meta: &crate::schema::Metadata) -> Vec<(&'static str, Value)> {
    let mut attributes = Vec::new();
    if meta.version != "1.0.0" {
        attributes.push(("tensorbuffers.version", Value::from(meta.version.clone())));
    }
    if let Some(model) = &meta.model {
        attributes.push(("tensorbuffers.model", Value::from(model.clone())));
    }
    match &meta.operations {
        None => attributes.push(("tensorbuffers.operations", Value::Null)),
        Some(ops) if !ops.is_empty() => attributes.push((
            "tensorbuffers.operations",
            Value::Array(ops.iter().map(op_to_value).collect()),
        )),
        Some(_) => {}
    }
    // The table order, when the data alone cannot say it: zero-size tensors share offsets, and
    // a file whose data is not laid out in table order would be rewritten in data order.
    let in_data_order = meta.tensors.windows(2).all(|w| w[0].data_offset <= w[1].data_offset);
    if meta.tensors.iter().any(|t| t.data_size == 0) || !in_data_order {
        let names = meta.tensors.iter().map(|t| Value::from(t.name.clone())).collect();
        attributes.push(("tensorbuffers.order", Value::Array(names)));
    }
    attributes
}

fn op_to_value(op: &Operation) -> Value {
    text_map([
        ("id", Value::from(op.id)),
        ("operation", Value::Integer(i128::from(op.operation))),
        ("output", Value::from(op.output)),
        (
            "input_operations",
            Value::Array(op.input_operations.iter().map(|&i| Value::from(i)).collect()),
        ),
    ])
}

pub(crate) fn op_from_value(v: &Value) -> Option<Operation> {
    let get =
        |key: &str| v.as_map()?.iter().find(|(k, _)| k.as_text() == Some(key)).map(|(_, v)| v);
    Some(Operation {
        id: get("id")?.as_u64()?,
        operation: match get("operation")? {
            &Value::Integer(i) => i8::try_from(i).ok()?,
            _ => return None,
        },
        output: get("output")?.as_u64()?,
        input_operations: get("input_operations")?
            .as_array()?
            .iter()
            .map(Value::as_u64)
            .collect::<Option<Vec<u64>>>()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_survive_attribute_form() {
        let op = Operation { id: 7, operation: -3, output: 9, input_operations: vec![1, 2] };
        assert_eq!(op_from_value(&op_to_value(&op)), Some(op));
        assert_eq!(op_from_value(&Value::from(1u64)), None);
    }
}
