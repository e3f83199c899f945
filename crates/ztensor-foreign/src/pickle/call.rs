//! What calling each modelled global makes (`REDUCE`, `NEWOBJ`), and what setting an object's
//! state does (`BUILD`): the values are modelled here, nothing is executed.

use super::*;

impl Machine<'_> {
    /// `callable(*args)` for the globals modelled here.
    pub(super) fn call(&mut self, callable: Id, args: Id, depth: u32) -> Result<Node> {
        if depth > 4 {
            return Err(malformed(self.at, "tensor rebuilds nested past any torch.save writes"));
        }
        let Node::Global(global) = self.nodes[callable].clone() else {
            return Err(malformed(
                self.at,
                format!("calling {}, not a global", self.nodes[callable].kind()),
            ));
        };
        let args = self.items(args)?.to_vec();
        self.spend(args.len())?;
        let arity = |n: std::ops::RangeInclusive<usize>| {
            if n.contains(&args.len()) {
                Ok(())
            } else {
                Err(malformed(
                    self.at,
                    format!("{} called with {} arguments", global.describe(), args.len()),
                ))
            }
        };
        Ok(match global {
            Global::OrderedDict => {
                arity(0..=1)?;
                let dict = self.nodes.len();
                self.nodes.push(Node::Dict(Box::default()));
                if let Some(&pairs) = args.first() {
                    let pairs = self.items(pairs)?.to_vec();
                    self.spend(pairs.len())?;
                    for pair in pairs {
                        let kv = self.items(pair)?.to_vec();
                        if kv.len() != 2 {
                            return Err(malformed(
                                self.at,
                                "an OrderedDict item that is not a pair",
                            ));
                        }
                        self.set_item(dict, kv[0], kv[1])?;
                    }
                }
                self.nodes.pop().unwrap_or(Node::None)
            }
            Global::RebuildTensor | Global::RebuildTensorV3 => {
                let v3 = global == Global::RebuildTensorV3;
                arity(if v3 { 7..=8 } else { 4..=7 })?;
                let Node::Storage(storage) = self.nodes[args[0]].clone() else {
                    return Err(malformed(
                        self.at,
                        "a tensor rebuilt from something not a storage",
                    ));
                };
                let offset = u64::try_from(self.int(args[1])?)
                    .map_err(|_| malformed(self.at, "a negative storage offset"))?;
                let shape = self.dims(args[2], "a shape")?;
                let strides = self.dims(args[3], "strides")?;
                if shape.len() != strides.len() {
                    return Err(malformed(
                        self.at,
                        format!(
                            "a shape of {} dimensions with {} strides",
                            shape.len(),
                            strides.len()
                        ),
                    ));
                }
                let dtype = if v3 {
                    match &self.nodes[args[6]] {
                        Node::Global(Global::Dtype(d)) => d,
                        other => {
                            return Err(malformed(
                                self.at,
                                format!("a tensor dtype that is {}", other.kind()),
                            ));
                        }
                    }
                } else {
                    storage.dtype
                };
                Node::Tensor(Box::new(TensorRef {
                    storage: *storage,
                    dtype,
                    offset,
                    shape,
                    strides,
                }))
            }
            Global::RebuildParameter => {
                arity(3..=4)?;
                match &self.nodes[args[0]] {
                    Node::Tensor(t) => Node::Tensor(t.clone()),
                    other => {
                        return Err(malformed(
                            self.at,
                            format!("a parameter of {}, not a tensor", other.kind()),
                        ));
                    }
                }
            }
            Global::RebuildFromType => {
                arity(4..=4)?;
                if !matches!(self.nodes[args[1]], Node::Global(Global::TensorType)) {
                    return Err(malformed(self.at, "a tensor of a type other than torch.Tensor"));
                }
                self.call(args[0], args[2], depth + 1)?
            }
            Global::Size => {
                arity(0..=1)?;
                match args.first() {
                    Some(&t) => {
                        let items = self.items(t)?.to_vec();
                        self.spend(items.len())?;
                        Node::Tuple(items)
                    }
                    None => Node::Tuple(Vec::new()),
                }
            }
            Global::Bytes => {
                arity(0..=0)?;
                Node::Bytes(Vec::new())
            }
            Global::Encode => {
                arity(1..=2)?;
                let len = self.string(args[0])?.len();
                self.spend(len)?;
                let text = self.string(args[0])?;
                let encoding = match args.get(1) {
                    Some(&e) => self.string(e)?.to_ascii_lowercase(),
                    None => "utf-8".to_owned(),
                };
                match encoding.as_str() {
                    "latin1" | "latin-1" | "iso-8859-1" => Node::Bytes(
                        text.chars()
                            .map(|c| u8::try_from(u32::from(c)))
                            .collect::<std::result::Result<_, _>>()
                            .map_err(|_| malformed(self.at, "a latin-1 text past U+00FF"))?,
                    ),
                    "utf-8" | "utf8" => Node::Bytes(text.as_bytes().to_vec()),
                    other => {
                        return Err(malformed(self.at, format!("_codecs.encode to {other:?}")));
                    }
                }
            }
            Global::NumpyDtype => {
                arity(1..=3)?;
                let len = self.string(args[0])?.len();
                self.spend(len)?;
                let descr = self.string(args[0])?.to_owned();
                Node::NumpyDtype(descr, '=')
            }
            Global::NumpyScalar => {
                arity(2..=2)?;
                self.numpy_scalar(args[0], args[1])?
            }
            Global::Set => {
                arity(0..=1)?;
                match args.first() {
                    Some(&t) => {
                        let items = self.items(t)?.to_vec();
                        self.spend(items.len())?;
                        Node::Set(items)
                    }
                    None => Node::Set(Vec::new()),
                }
            }
            Global::GetLayout => {
                arity(1..=1)?;
                match self.string(args[0])? {
                    "torch.sparse_coo" => Node::Global(Global::Layout("sparse_coo")),
                    "torch.sparse_csr" => Node::Global(Global::Layout("sparse_csr")),
                    // A Distributed Checkpoint's tensor properties name the dense layout.
                    "torch.strided" => Node::Global(Global::Layout("strided")),
                    other => {
                        let shown: String = other.chars().take(64).collect();
                        return Err(malformed(
                            self.at,
                            format!(
                                "a tensor of layout {shown}: sparse COO and CSR tensors are read \
                                 (convert others with .to_sparse_coo() before saving)"
                            ),
                        ));
                    }
                }
            }
            Global::RebuildSparse => {
                arity(2..=2)?;
                let Node::Global(Global::Layout(layout)) = self.nodes[args[0]] else {
                    return Err(malformed(self.at, "a sparse tensor without a sparse layout"));
                };
                let data = self.items(args[1])?.to_vec();
                let tensor = |m: &Self, id: Id| match &m.nodes[id] {
                    Node::Tensor(t) => Ok((**t).clone()),
                    other => Err(malformed(
                        m.at,
                        format!("a sparse tensor part that is {}, not a tensor", other.kind()),
                    )),
                };
                let (parts, size) = match (layout, data.len()) {
                    ("sparse_coo", 3 | 4) => (
                        vec![
                            ("coords", tensor(self, data[0])?),
                            ("values", tensor(self, data[1])?),
                        ],
                        data[2],
                    ),
                    ("sparse_csr", 4) => (
                        vec![
                            ("indptr", tensor(self, data[0])?),
                            ("indices", tensor(self, data[1])?),
                            ("values", tensor(self, data[2])?),
                        ],
                        data[3],
                    ),
                    _ => {
                        return Err(malformed(
                            self.at,
                            format!("a {layout} tensor of {} parts", data.len()),
                        ));
                    }
                };
                let shape = self.dims(size, "a sparse size")?;
                Node::Sparse(Box::new(SparseRef { layout, shape, parts }))
            }
            Global::MemoryFormat => {
                arity(1..=1)?;
                match self.nodes[args[0]] {
                    Node::Int(n) => Node::Int(n),
                    ref other => {
                        return Err(malformed(
                            self.at,
                            format!("a memory format of {}, not an int", other.kind()),
                        ));
                    }
                }
            }
            Global::Path => {
                let mut parts = Vec::with_capacity(args.len());
                for &part in &args {
                    parts.push(self.string(part)?.to_owned());
                }
                self.spend(parts.iter().map(String::len).sum())?;
                Node::Str(parts.join("/").replacen("//", "/", 1))
            }
            Global::TensorType
            | Global::Storage(_)
            | Global::Dtype(_)
            | Global::Layout(_)
            | Global::Record(_) => {
                return Err(malformed(self.at, format!("calling {}", global.describe())));
            }
        })
    }

    pub(super) fn numpy_scalar(&self, dtype: Id, data: Id) -> Result<Node> {
        let (Node::NumpyDtype(descr, order), Node::Bytes(b)) =
            (&self.nodes[dtype], &self.nodes[data])
        else {
            return Err(malformed(self.at, "a NumPy scalar without a dtype and its bytes"));
        };
        let kind = descr.trim_start_matches(['<', '>', '|', '=']);
        let big = *order == '>' || descr.starts_with('>');
        let mut bytes = b.clone();
        let width = kind.get(1..).and_then(|w| w.parse::<usize>().ok()).unwrap_or(0);
        if bytes.len() != width {
            return Err(malformed(
                self.at,
                format!("a NumPy {descr} scalar of {} bytes", bytes.len()),
            ));
        }
        if big {
            bytes.reverse();
        }
        // Little-endian now: widened with zeros (unsigned) or the sign (signed).
        let signed = kind.starts_with('i') && bytes.last().is_some_and(|&b| b & 0x80 != 0);
        let mut wide = [if signed { 0xFF } else { 0 }; 16];
        wide[..width.min(16)].copy_from_slice(&bytes[..width.min(16)]);
        let mut eight = [0u8; 8];
        eight.copy_from_slice(&wide[..8]);
        let bits = u64::from_le_bytes(eight);
        Ok(match (kind.as_bytes().first(), width) {
            (Some(b'b'), 1) => Node::Bool(bytes[0] != 0),
            (Some(b'u' | b'i'), 1 | 2 | 4 | 8) => Node::Int(i128::from_le_bytes(wide)),
            (Some(b'f'), 2) => {
                Node::Float(f64::from(half::f16::from_le_bytes([bytes[0], bytes[1]])))
            }
            (Some(b'f'), 4) => {
                Node::Float(f64::from(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])))
            }
            (Some(b'f'), 8) => Node::Float(f64::from_bits(bits)),
            _ => {
                return Err(malformed(self.at, format!("a NumPy scalar of dtype {descr:?}")));
            }
        })
    }

    /// `obj.__setstate__(state)` for what accepts one: an `OrderedDict`'s instance attributes
    /// (`_metadata` of a state dict) are dropped; a NumPy dtype takes its byte order.
    pub(super) fn build(&mut self, obj: Id, state: Id) -> Result<()> {
        match &self.nodes[obj] {
            Node::Dict(_) | Node::Tensor(_) => Ok(()),
            Node::Record(class, None) => {
                let class = *class;
                self.nodes[obj] = Node::Record(class, Some(state));
                Ok(())
            }
            Node::NumpyDtype(descr, _) => {
                let descr = descr.clone();
                let order = self
                    .items(state)
                    .ok()
                    .and_then(|s| s.get(1).copied())
                    .and_then(|o| self.string(o).ok())
                    .and_then(|o| o.chars().next())
                    .unwrap_or('=');
                self.nodes[obj] = Node::NumpyDtype(descr, order);
                Ok(())
            }
            other => Err(malformed(self.at, format!("setting the state of {}", other.kind()))),
        }
    }
}
