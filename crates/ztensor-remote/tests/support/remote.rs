//! What the object-storage tests share: a client for the moto server under test, objects read
//! back whole, and data that shows a wrong range.

use ztensor_remote::{ErrorKind, Location, RemoteObject, RemoteOptions};
use ztensor_source::ReadAt;

use super::moto;

/// Options for the moto server at `endpoint` (its fixed test credentials).
pub fn options_at(endpoint: &str) -> RemoteOptions {
    let settings = [
        ("aws_endpoint", endpoint),
        ("aws_access_key_id", "testing"),
        ("aws_secret_access_key", "testing"),
        ("aws_region", "us-east-1"),
    ];
    let settings = settings.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    RemoteOptions { settings, ..Default::default() }
}

/// Options for `moto`.
pub fn options(moto: &moto::Moto) -> RemoteOptions {
    options_at(&moto.endpoint)
}

/// The object at `url` read whole, or the error's kind.
pub fn read_back(moto: &moto::Moto, url: &str) -> Result<Vec<u8>, ErrorKind> {
    let object = RemoteObject::open(&Location::parse(url).unwrap(), &options(moto))
        .map_err(|e| e.kind().clone())?;
    let mut all = vec![0u8; object.len() as usize];
    object.read_exact_at(0, &mut all).unwrap();
    Ok(all)
}

/// Bytes that differ at every offset, so a wrong range shows.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed).collect()
}

/// Deletes the object at `url`.
#[allow(dead_code)]
pub fn delete(moto: &moto::Moto, url: &str) {
    ztensor_remote::delete(&Location::parse(url).unwrap(), &options(moto)).unwrap();
}
