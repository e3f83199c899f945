use super::*;
use crate::framing::Container;

#[test]
fn aliases_find_the_first_reading_of_each_kind_whatever_the_order() {
    // One 64-byte blob read four ways, in an order that puts another reading first, and
    // two empty blobs (never indexed: each is its own).
    let u8s = Component::new(DType::U8, 64, 64);
    let u16s = Component::new(DType::U16, 64, 64);
    let empty = Component::new(DType::U8, 128, 0);
    let object = |name: &str, shape: u64, c: &Component| {
        Object::new(name, vec![shape], Format::Dense).with_component("data", c.clone())
    };
    let mut manifest = Manifest::new(Version::V1_2);
    manifest.objects = vec![
        object("u16-a", 32, &u16s),
        object("u8-a", 64, &u8s),
        object("u8-b", 64, &u8s),
        object("u16-b", 32, &u16s),
        object("e1", 0, &empty),
        object("e2", 0, &empty),
    ];
    let location =
        ManifestLocation { container: Container::V1, offset: 128, len: 10, file_len: 154 };
    let validated = validate(manifest, location, &Options::default()).unwrap();
    assert_eq!(validated.aliases(), [0, 1, 1, 0, 4, 5]);
}
