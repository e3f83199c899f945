use super::*;

fn run(bytes: &[u8]) -> Result<Pickle> {
    load(bytes, &mut |m, pid| Ok(Node::Storage(Box::new(storage_of(m, pid)?)))).map(|(p, _)| p)
}

#[test]
fn plain_data_builds_as_python_does() {
    // pickle.dumps({'a': [1, -2, 3.5, None, True], 'b': (b'x', 'é')}, protocol=2),
    // written out opcode by opcode.
    let mut p = vec![0x80, 2, b'}', b'q', 0, b'('];
    p.extend(b"X\x01\x00\x00\x00a");
    p.extend(b"]q\x01(K\x01J\xfe\xff\xff\xffG\x40\x0c\x00\x00\x00\x00\x00\x00N\x88e");
    p.extend(b"X\x01\x00\x00\x00b");
    p.extend(b"C\x01x");
    p.extend(b"X\x02\x00\x00\x00\xc3\xa9");
    p.extend(b"\x86u.");
    let pickle = run(&p).unwrap();
    let Node::Dict(d) = pickle.node(pickle.root) else { panic!() };
    assert_eq!(d.items.len(), 2);
    let Node::List(l) = pickle.node(d.items[0].1) else { panic!() };
    let values: Vec<String> = l.iter().map(|&i| format!("{:?}", pickle.node(i))).collect();
    assert_eq!(values, ["Int(1)", "Int(-2)", "Float(3.5)", "None", "Bool(true)"]);
    let Node::Tuple(t) = pickle.node(d.items[1].1) else { panic!() };
    assert!(matches!(pickle.node(t[1]), Node::Str(s) if s == "é"));
}

#[test]
fn memoized_lists_are_shared_and_later_appends_seen() {
    // l = []; d = {'x': l, 'y': l}; then appended to through the memo.
    let p = b"\x80\x02}q\x00(X\x01\x00\x00\x00x]q\x01X\x01\x00\x00\x00yh\x01uh\x01K\x07a0.";
    let pickle = run(p).unwrap();
    let Node::Dict(d) = pickle.node(pickle.root) else { panic!() };
    assert_eq!(d.items[0].1, d.items[1].1);
    assert!(matches!(pickle.node(d.items[0].1), Node::List(v) if v.len() == 1));
}

#[test]
fn globals_outside_the_list_are_refused_by_name() {
    for (p, name) in [
        (&b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00idh\x85R."[..], "os.system"),
        (b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93.", "builtins.eval"),
        (b"\x80\x02ctorch._utils\n_rebuild_qtensor\n.", "_rebuild_qtensor"),
        (b"\x80\x02ctorch\nload\n.", "torch.load"),
    ] {
        let e = run(p).unwrap_err().to_string();
        assert!(e.contains(name), "{e}");
    }
}

#[test]
fn damaged_pickles_are_refused() {
    for p in [
        &b"\x80\x02X\xff\xff\xff\xff."[..], // a length past the end
        b"\x80\x02h\x05.",                  // a memo entry never put
        b"\x80\x02(t",                      // no STOP
        b"\x80\x02K\x01K\x02.",             // two values left
        b"\x80\x02\x86.",                   // TUPLE2 of nothing
        b"\x80\x02(K\x01\x85.",             // TUPLE1 across a mark... then STOP with mark
        b"\x80\x02K\x01K\x02s.",            // SETITEM on an int
        b"\x80\x02\x8b\xff\xff\xff\x7f.",   // LONG4 claiming 2 GB
        b"\x80\x02\x8a\x20AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.", // a 256-bit integer
        b"\x80\x02cnumpy\ndtype\n)R.",      // numpy.dtype without its string
        b"\x80\x02\x97.",                   // NEXT_BUFFER
        b"\x80\x02\xff.",                   // an unknown opcode
        b"\x80\x02(X\x07\x00\x00\x00storageK\x00K\x00K\x00K\x00tQ.", // not a storage type
    ] {
        let e = run(p).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed, "{p:?}: {e}");
    }
}

#[test]
fn numpy_scalars_and_latin1_bytes_are_plain_values() {
    // numpy.float64(0.5) as torch.save pickles it (protocol 2):
    // scalar(dtype('f8', False, True) with state (3, '<', ...), encode('\x00..\xe0?', 'latin1'))
    let mut p =
        b"\x80\x02cnumpy.core.multiarray\nscalar\ncnumpy\ndtype\nX\x02\x00\x00\x00f8\x89\x88\x87R"
            .to_vec();
    p.extend(b"(K\x03X\x01\x00\x00\x00<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb");
    p.extend(b"c_codecs\nencode\nX\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00\xc3\xa0?X\x06\x00\x00\x00latin1\x86R\x86R.");
    let pickle = run(&p).unwrap();
    assert!(
        matches!(pickle.node(pickle.root), Node::Float(f) if *f == 0.5),
        "{:?}",
        pickle.node(pickle.root)
    );
}

#[test]
fn copying_a_shared_value_many_times_is_refused() {
    // A 1 MB string, then 200 dicts each keyed by it (6 bytes per 1 MB copied).
    let mut p = b"\x80\x02X\x00\x00\x10\x00".to_vec();
    p.extend(std::iter::repeat_n(b'a', 1 << 20));
    p.extend(b"q\x000");
    for _ in 0..200 {
        p.extend(b"}h\x00Ns0");
    }
    p.extend(b"N.");
    let e = run(&p).unwrap_err().to_string();
    assert!(e.contains("far more"), "{e}");
}

/// A pickle of `n` copies of `op` on a protocol 2 header, left on the stack (STOP is
/// never reached: the budget must refuse first).
fn flood(op: &[u8], n: usize) -> Vec<u8> {
    let mut p = vec![0x80, 2];
    for _ in 0..n {
        p.extend_from_slice(op);
    }
    p.push(b'.');
    p
}

#[test]
fn memory_is_counted_in_bytes_not_values() {
    // One-byte opcodes that each make a container (an empty dict is ~100 bytes in the
    // arena): refused once their memory passes the budget, whatever the count of values.
    let n = Budget::BASE / 16;
    for op in [&b"}"[..], b"]", b")", b"\x8f"] {
        let p = flood(op, n);
        let e = run(&p).unwrap_err().to_string();
        assert!(e.contains("far more than its size explains"), "{op:?}: {e}");
    }
    // Shared scalars cost a slot each, not a value: a tuple of a million small ints and
    // Nones is within the budget and built with few values.
    let mut p = vec![0x80, 2, b'('];
    for i in 0..1_000_000u32 {
        if i % 2 == 0 {
            p.push(b'M');
            p.extend_from_slice(&(i % 0x1_0000).to_le_bytes()[..2]);
        } else {
            p.push(b'N');
        }
    }
    p.extend(b"t.");
    let pickle = run(&p).unwrap();
    assert!(matches!(pickle.node(pickle.root), Node::Tuple(t) if t.len() == 1_000_000));
    assert!(pickle.nodes.len() < 70_000, "{} values", pickle.nodes.len());
    // What readers copy out draws from the same budget.
    let before = pickle.budget.left.get();
    pickle.budget.spend(before, "a test").unwrap();
    assert!(pickle.budget.spend(1, "a test").is_err());
}

#[test]
fn stack_rules_match_cpython() {
    for (p, words) in [
        // APPEND to a list that lies below a mark.
        (&b"\x80\x02](K\x01a."[..], "below a mark"),
        // ADDITEMS to a list, APPEND to a set.
        (b"\x80\x02](K\x01\x90.", "not a set"),
        (b"\x80\x02\x8fK\x01a.", "not a list"),
        // A Python 2 str that is not UTF-8.
        (b"\x80\x02U\x01\xff.", "not UTF-8"),
        // A legacy storage view.
        (b"\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x04(X\x01\x00\x00\x001K\x00K\x02ttQ.", "storage view"),
    ] {
        let e = run(p).unwrap_err().to_string();
        assert!(e.contains(words), "{p:?}: {e}");
    }
    // bytes() is b"" (protocol 2); NEWOBJ of OrderedDict ignores its arguments.
    let empty = run(b"\x80\x02c__builtin__\nbytes\n)R.").unwrap();
    assert!(matches!(empty.node(empty.root), Node::Bytes(b) if b.is_empty()));
    let dict = run(b"\x80\x02ccollections\nOrderedDict\n]K\x01K\x02\x86a\x85\x81.").unwrap();
    assert!(matches!(dict.node(dict.root), Node::Dict(d) if d.items.is_empty()));
}
