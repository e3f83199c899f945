//! What each object becomes in zTensor 2 before a byte is written: its parts, types and
//! attributes ([`plan`]), the file's attributes, and the order objects are written in.

use super::*;

/// One part as it will be written: its types and where its bytes come from.
pub(crate) struct PlannedPart {
    pub(crate) role: String,
    pub(crate) dtype: Dtype,
    pub(crate) logical: Option<String>,
    /// A 1.x `bool` component: its bytes are made 0 or 1 ([`bool_piece`]).
    pub(crate) bools: bool,
}

/// One object as it will be written.
pub(crate) struct Planned {
    pub(crate) layout: String,
    pub(crate) shape: Vec<u64>,
    pub(crate) attributes: Option<Vec<u8>>,
    pub(crate) parts: Vec<PlannedPart>,
}

/// Object `info` in zTensor 2 terms, or why it cannot be written.
/// Whether the components `info` lists are those a read gives. A v0.1 sparse tensor lists the
/// one blob it is stored in and reads as its three arrays: it is planned from a read.
pub(crate) fn listed_as_read(info: &ObjectInfo<'_>) -> bool {
    match info.format.required_roles() {
        Some(roles) if info.format != Format::Dense => {
            info.components.iter().all(|c| roles.contains(&c.role.as_ref()))
        }
        _ => true,
    }
}

/// Object `info` in zTensor 2 terms (its parts from `data` when given: see
/// [`listed_as_read`]), or why it cannot be written.
pub(crate) fn plan(
    info: &ObjectInfo<'_>,
    data: Option<&ObjectData<'_>>,
    options: &WriteOptions,
) -> Result<Planned> {
    let name = info.name.as_ref();
    let within = |e: Error| e.within(&format!("object {name:?}"));
    if let Some(reason) = &info.unsupported {
        // The reason names the object already when its source put it there.
        return Err(if reason.object() == Some(name) {
            Error::unrepresentable(
                Refused::Dtype,
                format!("{reason}; it cannot be decoded here, so it cannot be written"),
            )
        } else {
            within(Error::unrepresentable(
                Refused::Dtype,
                format!("it cannot be decoded here, so it cannot be written: {reason}"),
            ))
        });
    }
    if name.is_empty() || name.len() > crate::manifest::MAX_NAME || name.contains('\0') {
        return Err(within(Error::unrepresentable(
            Refused::Dtype,
            "zTensor 2 names are 1 to 1024 bytes without U+0000",
        )));
    }
    if info.components.is_empty() {
        return Err(within(Error::unrepresentable(
            Refused::Dtype,
            "a zTensor 2 object has at least one part",
        )));
    }
    let n = elements(&info.shape).filter(|_| info.shape.len() <= crate::manifest::MAX_RANK);
    let Some(n) = n else {
        return Err(within(Error::unrepresentable(
            Refused::Dtype,
            "zTensor 2 shapes have rank 64 at most and fewer than 2^64 elements",
        )));
    };
    let listed: Vec<(&str, StorageType, Option<&LogicalType>, Option<u64>)> = match data {
        Some(data) => data
            .components
            .iter()
            .map(|(role, c)| {
                let len = Some(c.bytes.len() as u64);
                (role.as_str(), StorageType::Known(c.dtype), c.logical_type.as_ref(), len)
            })
            .collect(),
        None => info
            .components
            .iter()
            .map(|c| (c.role.as_ref(), c.dtype.clone(), c.logical_type.as_ref(), c.decoded_len))
            .collect(),
    };
    let mut parts = Vec::with_capacity(listed.len());
    for (role, storage, logical_type, decoded_len) in listed {
        let Some(dtype) = storage.known() else {
            return Err(within(Error::unrepresentable(
                Refused::Dtype,
                format!("component {role:?} has dtype {storage}, which zTensor 2 lacks"),
            )));
        };
        let (dtype, logical) = types_2(dtype, logical_type)
            .map_err(|e| within(e.within(&format!("component {role:?}"))))?;
        if role.is_empty() || role.len() > crate::manifest::MAX_NAME || role.contains('\0') {
            return Err(within(Error::unrepresentable(
                Refused::Dtype,
                format!("component {role:?}: zTensor 2 part names are 1 to 1024 bytes"),
            )));
        }
        // A dense tensor's size follows its type in zTensor 2: a 1.x logical type that zTensor
        // 2 registers with another size (1.x FP4 holds one value a byte) does not fit.
        if info.format == Format::Dense
            && let (Some(len), Some(size)) =
                (decoded_len, stored_size(dtype, logical.as_deref(), n))
            && len != size
        {
            return Err(within(Error::unrepresentable(
                Refused::Dtype,
                format!(
                    "{n} elements of {} take {size} bytes in zTensor 2, and this tensor holds \
                     {len}",
                    logical.as_deref().unwrap_or(dtype.name())
                ),
            )));
        }
        let bools = storage.known() == Some(DType::Bool);
        parts.push(PlannedPart { role: role.to_owned(), dtype, logical, bools });
    }
    parts.sort_by(|a, b| a.role.as_bytes().cmp(b.role.as_bytes()));
    let attributes = match (&info.attributes, options.drop_attributes) {
        (Some(a), false) => attributes_2_encoded(a, 4, Refused::ObjectAttributes)
            .map_err(within)?
            .map(<[u8]>::to_vec),
        _ => None,
    };
    Ok(Planned { layout: layout_of(&info.format), shape: info.shape.to_vec(), attributes, parts })
}

/// `piece` of a `bool` part with every non-zero byte made 1 (zTensor 0.1 reads any non-zero
/// byte as true; zTensor 2, as 1.x, holds only 0 and 1), copied into `scratch` only when a byte
/// changes.
pub(crate) fn bool_piece<'a>(piece: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
    if piece.iter().all(|&b| b <= 1) {
        return piece;
    }
    scratch.clear();
    scratch.extend(piece.iter().map(|&b| u8::from(b != 0)));
    scratch
}

/// What gives a part's bytes: called once, it hands each piece in order to its argument.
pub(crate) type Fill<'a> = dyn FnMut(&mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> + 'a;

/// `source`'s file attributes as zTensor 2 holds them, encoded (`None` when `options` drop
/// them): their own bytes, checked, never a tree of them.
pub(crate) fn file_attributes_2(
    source: &dyn TensorSource,
    options: &WriteOptions,
) -> Result<Option<Vec<u8>>> {
    if options.drop_attributes {
        return Ok(None);
    }
    let attributes =
        source.try_attributes().map_err(|e| Error::source("reading the file's attributes", e))?;
    match attributes {
        Some(a) => attributes_2_encoded(&a, 2, Refused::FileAttributes)
            .map(|b| b.map(<[u8]>::to_vec))
            .map_err(|e| e.within("the file's attributes")),
        None => Ok(None),
    }
}

/// A source's objects in the byte order of their names (the order their blobs are written
/// in), the names held in one buffer: a few bytes an object besides its name, not a `String`
/// and an allocation each.
pub(crate) struct Order {
    pub(super) names: String,
    /// Each object's name (where it starts in `names`, its length) and index in the source,
    /// in the byte order of the names.
    pub(super) entries: Vec<(usize, u32, u32)>,
}

impl Order {
    /// The objects of `source`, each checked to be writable (planned, from a read where its
    /// listing is not what a read gives), in the byte order of their names.
    ///
    /// # Errors
    /// What [`plan`] refuses, read errors, and names given twice.
    pub(super) fn of(source: &dyn TensorSource, options: &WriteOptions) -> Result<Order> {
        let gone = || Error::io("listing objects", std::io::Error::other("object gone"));
        let mut order = Order { names: String::new(), entries: Vec::with_capacity(source.len()) };
        for index in 0..source.len() {
            let info = source.info(index).ok_or_else(gone)?;
            if listed_as_read(&info) {
                plan(&info, None, options)?;
            } else {
                let data = source.read(index).map_err(|e| read_error(&info.name, e))?;
                plan(&info, Some(&data), options)?;
            }
            // Names are at most 1024 bytes ([`plan`] refuses longer ones).
            let many = || Error::io("listing objects", std::io::Error::other("over 2^32 objects"));
            let len = u32::try_from(info.name.len()).map_err(|_| many())?;
            let at = u32::try_from(index).map_err(|_| many())?;
            order.entries.push((order.names.len(), len, at));
            order.names.push_str(&info.name);
        }
        order.names.shrink_to_fit();
        let Order { names, entries } = &mut order;
        let name =
            |&(start, len, _): &(usize, u32, u32)| &names.as_bytes()[start..][..len as usize];
        entries.sort_by(|a, b| name(a).cmp(name(b)));
        if let Some(k) = (1..order.len()).find(|&k| order.name(k - 1) == order.name(k)) {
            return Err(Error::unrepresentable(
                Refused::Dtype,
                format!(
                    "object {:?} is given twice, and zTensor 2 names are unique",
                    order.name(k)
                ),
            ));
        }
        Ok(order)
    }

    /// How many objects.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The `k`-th name in byte order.
    pub(crate) fn name(&self, k: usize) -> &str {
        let (start, len, _) = self.entries[k];
        &self.names[start..][..len as usize]
    }

    /// The source's index of the `k`-th object.
    pub(super) fn index(&self, k: usize) -> usize {
        self.entries[k].2 as usize
    }

    /// The places (in this order) of the objects in the order deterministic CBOR gives their
    /// names as map keys: shorter first, then bytewise (the byte order these are in already).
    pub(super) fn key_order(&self) -> Vec<u32> {
        // The casts cannot truncate: there are at most 2^32 objects ([`Order::of`]).
        #[allow(clippy::cast_possible_truncation)]
        let mut keys: Vec<u32> = (0..self.len() as u32).collect();
        // Stable: names of one length stay in byte order.
        keys.sort_by_key(|&k| self.entries[k as usize].1);
        keys
    }
}

/// The CBOR of `name` as a map key.
pub(crate) fn encoded_key(name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() + 3);
    ztensor_format::cbor::head(&mut key, 3, name.len() as u64);
    key.extend_from_slice(name.as_bytes());
    key
}
