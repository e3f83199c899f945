//! The opcodes of pickle protocols 0 to 5 that build plain data, each bounded by the bytes left
//! and charged to the budget: the machine's main loop.

use super::*;

impl Machine<'_> {
    pub(super) fn run(
        &mut self,
        persistent: &mut dyn FnMut(&Machine<'_>, Id) -> Result<Node>,
    ) -> Result<Id> {
        loop {
            let at = self.at;
            let op = self.u8()?;
            match op {
                // PROTO
                0x80 => {
                    self.protocol = self.u8()?;
                    if self.protocol > 5 {
                        return Err(malformed(at, format!("pickle protocol {}", self.protocol)));
                    }
                }
                // FRAME: a hint for buffered readers.
                0x95 => {
                    self.le(8)?;
                }
                // STOP
                b'.' => {
                    let root = self.pop()?;
                    if !self.stack.is_empty() || !self.marks.is_empty() {
                        return Err(malformed(at, "values left on the stack at STOP"));
                    }
                    return Ok(root);
                }
                // MARK
                b'(' => self.marks.push(self.stack.len()),
                // POP, POP_MARK, DUP
                b'0' => {
                    if self.marks.last() == Some(&self.stack.len()) {
                        self.marks.pop();
                    } else {
                        self.pop()?;
                    }
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let top = self.top()?;
                    self.push_id(top)?;
                }
                // Constants and numbers.
                b'N' => self.push(Node::None)?,
                0x88 => self.push(Node::Bool(true))?,
                0x89 => self.push(Node::Bool(false))?,
                b'J' => {
                    let b = self.take(4)?;
                    let v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    self.push(Node::Int(i128::from(v)))?;
                }
                b'K' => {
                    let v = self.le(1)?;
                    self.push(Node::Int(i128::from(v)))?;
                }
                b'M' => {
                    let v = self.le(2)?;
                    self.push(Node::Int(i128::from(v)))?;
                }
                0x8a | 0x8b => {
                    let n = if op == 0x8a { self.len(1)? } else { self.len(4)? };
                    if n > 16 {
                        return Err(malformed(at, format!("an integer of {n} bytes")));
                    }
                    let b = self.take(n)?;
                    let mut wide =
                        [if b.last().is_some_and(|&x| x & 0x80 != 0) { 0xFF } else { 0 }; 16];
                    wide[..n].copy_from_slice(b);
                    self.push(Node::Int(i128::from_le_bytes(wide)))?;
                }
                b'I' | b'L' => {
                    let line = self.line()?.trim_end_matches('L').to_owned();
                    let node = match line.as_str() {
                        "00" if op == b'I' => Node::Bool(false),
                        "01" if op == b'I' => Node::Bool(true),
                        digits => Node::Int(digits.parse().map_err(|_| {
                            let shown: String = digits.chars().take(64).collect();
                            malformed(at, format!("an integer {shown:?}"))
                        })?),
                    };
                    self.push(node)?;
                }
                b'G' => {
                    let v = f64::from_bits(u64::from_be_bytes(
                        self.take(8)?.try_into().unwrap_or([0; 8]),
                    ));
                    self.push(Node::Float(v))?;
                }
                b'F' => {
                    let line = self.line()?.to_owned();
                    let v = line.parse().map_err(|_| {
                        let shown: String = line.chars().take(64).collect();
                        malformed(at, format!("a float {shown:?}"))
                    })?;
                    self.push(Node::Float(v))?;
                }
                // Strings and bytes.
                b'X' | 0x8c | 0x8d => {
                    let n = match op {
                        0x8c => self.len(1)?,
                        b'X' => self.len(4)?,
                        _ => self.len(8)?,
                    };
                    let text = std::str::from_utf8(self.take(n)?)
                        .map_err(|_| malformed(at, "a str that is not UTF-8"))?
                        .to_owned();
                    self.push(Node::Str(text))?;
                }
                // Python 2 str: decoded as UTF-8, as torch.load does by default.
                b'T' | b'U' => {
                    let n = if op == b'U' { self.len(1)? } else { self.len(4)? };
                    let text = std::str::from_utf8(self.take(n)?)
                        .map_err(|_| malformed(at, "a Python 2 str that is not UTF-8"))?
                        .to_owned();
                    self.push(Node::Str(text))?;
                }
                b'B' | b'C' | 0x8e | 0x96 => {
                    let n = match op {
                        b'C' => self.len(1)?,
                        b'B' => self.len(4)?,
                        _ => self.len(8)?,
                    };
                    let bytes = self.take(n)?.to_vec();
                    self.push(Node::Bytes(bytes))?;
                }
                // Containers.
                b')' => self.push(Node::Tuple(Vec::new()))?,
                b']' => self.push(Node::List(Vec::new()))?,
                b'}' => self.push(Node::Dict(Box::default()))?,
                0x8f => self.push(Node::Set(Vec::new()))?,
                b't' => {
                    let items = self.pop_mark()?;
                    self.push(Node::Tuple(items))?;
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    if self.stack.len() < n
                        || self.marks.last().is_some_and(|&m| m > self.stack.len() - n)
                    {
                        return Err(malformed(at, format!("TUPLE{n} without {n} items")));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.push(Node::Tuple(items))?;
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push(Node::List(items))?;
                }
                0x91 => {
                    let items = self.pop_mark()?;
                    self.push(Node::Set(items))?;
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(malformed(at, "DICT with an odd number of items"));
                    }
                    self.push(Node::Dict(Box::default()))?;
                    let dict = self.top()?;
                    for kv in items.chunks_exact(2) {
                        self.set_item(dict, kv[0], kv[1])?;
                    }
                }
                b'a' => {
                    let item = self.pop()?;
                    let list = self.top()?;
                    self.append(list, &[item], false)?;
                }
                b'e' | 0x90 => {
                    let items = self.pop_mark()?;
                    let list = self.top()?;
                    self.append(list, &items, op == 0x90)?;
                }
                b's' => {
                    let value = self.pop()?;
                    let key = self.pop()?;
                    let dict = self.top()?;
                    self.set_item(dict, key, value)?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(malformed(at, "SETITEMS with an odd number of items"));
                    }
                    let dict = self.top()?;
                    for kv in items.chunks_exact(2) {
                        self.set_item(dict, kv[0], kv[1])?;
                    }
                }
                // The memo.
                b'q' | b'r' | b'p' | 0x94 => {
                    let key = match op {
                        b'q' => self.le(1)?,
                        b'r' => self.le(4)?,
                        b'p' => {
                            let line = self.line()?.to_owned();
                            line.parse().map_err(|_| malformed(at, "a PUT key"))?
                        }
                        _ => self.memo.len() as u64,
                    };
                    let top = self.top()?;
                    let bytes = self.memo.put(key, top);
                    self.memory.spend(bytes, "memo")?;
                }
                b'h' | b'j' | b'g' => {
                    let key = match op {
                        b'h' => self.le(1)?,
                        b'j' => self.le(4)?,
                        _ => {
                            let line = self.line()?.to_owned();
                            line.parse().map_err(|_| malformed(at, "a GET key"))?
                        }
                    };
                    let id = self
                        .memo
                        .get(key)
                        .ok_or_else(|| malformed(at, format!("memo entry {key} was never put")))?;
                    self.push_id(id)?;
                }
                // Globals and calls.
                b'c' => {
                    let module = self.line()?.to_owned();
                    let name = self.line()?.to_owned();
                    self.global(&module, &name)?;
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (module, name) =
                        (self.string(module)?.to_owned(), self.string(name)?.to_owned());
                    self.global(&module, &name)?;
                }
                b'R' => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let node = self.call(callable, args, 0)?;
                    self.push(node)?;
                }
                0x81 | 0x92 => {
                    if op == 0x92 {
                        let kwargs = self.pop()?;
                        if !matches!(&self.nodes[kwargs], Node::Dict(d) if d.items.is_empty()) {
                            return Err(malformed(at, "NEWOBJ_EX with keyword arguments"));
                        }
                    }
                    self.pop()?; // the arguments, which __new__ ignores
                    let class = self.pop()?;
                    match self.nodes[class] {
                        // `cls.__new__(cls, *args)` makes an empty dict whatever the arguments.
                        Node::Global(Global::OrderedDict) => {
                            self.push(Node::Dict(Box::default()))?;
                        }
                        // A record with no fields yet: `BUILD` gives them.
                        Node::Global(Global::Record(class)) => {
                            self.push(Node::Record(class, None))?;
                        }
                        _ => {
                            return Err(malformed(
                                at,
                                "NEWOBJ of a class other than collections.OrderedDict or a \
                                 Distributed Checkpoint record",
                            ));
                        }
                    }
                }
                b'b' => {
                    let state = self.pop()?;
                    let obj = self.top()?;
                    self.build(obj, state)?;
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let node = persistent(self, pid)?;
                    self.push(node)?;
                }
                b'P' => {
                    let _ = self.line()?;
                    return Err(malformed(at, "a text persistent id (PERSID)"));
                }
                b'i' | b'o' => {
                    return Err(malformed(at, "building an instance of a class (INST/OBJ)"));
                }
                0x82..=0x84 => {
                    return Err(malformed(at, "an extension-registry global (EXT)"));
                }
                0x97 | 0x98 => {
                    return Err(malformed(at, "an out-of-band buffer (protocol 5)"));
                }
                b'S' | b'V' => {
                    return Err(malformed(at, "a protocol 0 text string (STRING/UNICODE)"));
                }
                other => return Err(malformed(at, format!("unknown opcode 0x{other:02x}"))),
            }
        }
    }
}
