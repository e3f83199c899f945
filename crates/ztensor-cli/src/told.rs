//! Local inputs told (recognised) and held open until their opener takes them, so that a
//! command opens its input once.

use std::path::Path;

/// Local inputs told by [`tell`] and not yet opened, each with the descriptor it was told by:
/// the opener takes it, so a command opens its input once (as `remote::object` does for a
/// URL).
static TOLD: std::sync::Mutex<Vec<ztensor_registry::Detected>> = std::sync::Mutex::new(Vec::new());

/// What the local file at `path` is, through the format registry; the file stays open for the
/// command's opener ([`told`]).
/// Told again, a file still there is not opened again.
pub(crate) fn tell(path: &Path) -> Result<ztensor_registry::Kind, ztensor_registry::Error> {
    let mut told = TOLD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(held) = told.iter().find(|d| d.path() == path && d.is_current()) {
        return Ok(held.kind());
    }
    told.retain(|d| d.path() != path);
    let detected = ztensor_registry::Detected::new(path)?;
    let kind = detected.kind();
    told.push(detected);
    Ok(kind)
}

/// The input at `path` as [`tell`] left it open, when it is still the file there; else told
/// now, either way opened once more at most. A URL is the object it names, as this command
/// opened it ([`remote::object`](crate::remote::object)): one opener for both.
pub(crate) fn told(path: &Path) -> anyhow::Result<ztensor_registry::Detected> {
    if let Some(url) = crate::remote::url_of(path) {
        return Ok(ztensor_registry::Detected::object(crate::remote::object(url)?)?);
    }
    let mut told = TOLD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let held = told.iter().position(|d| d.path() == path).map(|i| told.swap_remove(i));
    drop(told);
    match held.filter(ztensor_registry::Detected::is_current) {
        Some(detected) => Ok(detected),
        None => Ok(ztensor_registry::Detected::new(path)?),
    }
}
