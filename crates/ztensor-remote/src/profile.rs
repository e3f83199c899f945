//! The AWS shared configuration files (`~/.aws/credentials` and `~/.aws/config`), read for the
//! profile `AWS_PROFILE` names (else `default`) as the AWS command-line tools read them, for the
//! settings the environment does not give.
//!
//! The files are a small INI dialect (sections, `key = value`, comment lines, indented
//! sub-settings); a parser of our own reads the few keys used here, where a general INI crate
//! would add a dependency for forty lines and still need the AWS rules (section names, which
//! file wins) written out.

use std::path::{Path, PathBuf};

/// What a profile says, each value where one of the files gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Profile {
    pub(crate) access_key_id: Option<String>,
    pub(crate) secret_access_key: Option<String>,
    pub(crate) session_token: Option<String>,
    pub(crate) region: Option<String>,
    pub(crate) endpoint_url: Option<String>,
}

/// The profile's name, the credentials file and the config file, from the environment
/// (`AWS_PROFILE`, else `AWS_DEFAULT_PROFILE`; `AWS_SHARED_CREDENTIALS_FILE` and
/// `AWS_CONFIG_FILE`, else `~/.aws/credentials` and `~/.aws/config`), and whether the name was
/// given (a profile named and found nowhere is an error; the default one may be absent).
pub(crate) fn from_env() -> (String, bool, Option<PathBuf>, Option<PathBuf>) {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let named = var("AWS_PROFILE").or_else(|| var("AWS_DEFAULT_PROFILE"));
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let file = |var_name: &str, default: &str| {
        var(var_name)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
    };
    let given = named.is_some();
    (
        named.unwrap_or_else(|| "default".to_owned()),
        given,
        file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
        file("AWS_CONFIG_FILE", "config"),
    )
}

/// The profile `name` from the files (either may be missing): the credentials file's section
/// `[name]` first, then the config file's `[profile name]` (or `[default]` for the default).
/// `None` when neither file has the profile.
pub(crate) fn read(
    name: &str,
    credentials: Option<&Path>,
    config: Option<&Path>,
) -> Option<Profile> {
    let text = |p: Option<&Path>| p.and_then(|p| std::fs::read_to_string(p).ok());
    parse(name, text(credentials).as_deref(), text(config).as_deref())
}

/// As [`read`], from the files' text.
pub(crate) fn parse(
    name: &str,
    credentials: Option<&str>,
    config: Option<&str>,
) -> Option<Profile> {
    let in_credentials = credentials.and_then(|t| section(t, |s| s == name));
    let in_config = config.and_then(|t| {
        section(t, |s| {
            s.strip_prefix("profile")
                .is_some_and(|rest| rest.starts_with(char::is_whitespace) && rest.trim() == name)
                || (name == "default" && s == "default")
        })
    });
    if in_credentials.is_none() && in_config.is_none() {
        return None;
    }
    let get = |key: &str| {
        let find = |pairs: &Option<Vec<(String, String)>>| {
            pairs.as_ref()?.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
        };
        find(&in_credentials).or_else(|| find(&in_config))
    };
    Some(Profile {
        access_key_id: get("aws_access_key_id"),
        secret_access_key: get("aws_secret_access_key"),
        session_token: get("aws_session_token"),
        region: get("region"),
        endpoint_url: get("endpoint_url"),
    })
}

/// The `key = value` pairs of the first section whose name (inside the brackets, trimmed)
/// `wanted` accepts; keys lower-cased, indented sub-settings left out.
fn section(text: &str, wanted: impl Fn(&str) -> bool) -> Option<Vec<(String, String)>> {
    let mut pairs: Option<Vec<(String, String)>> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            if pairs.is_some() {
                break;
            }
            if wanted(name.trim()) {
                pairs = Some(Vec::new());
            }
            continue;
        }
        // An indented line belongs to the setting above it (`s3 =` and its sub-settings).
        if line.starts_with(char::is_whitespace) {
            continue;
        }
        if let (Some(pairs), Some((key, value))) = (pairs.as_mut(), trimmed.split_once('=')) {
            let value = value.trim();
            if !value.is_empty() {
                pairs.push((key.trim().to_ascii_lowercase(), value.to_owned()));
            }
        }
    }
    pairs
}

/// Where AWS credentials were looked for, in the order the AWS tools look: for a message
/// saying none was found.
pub(crate) fn where_credentials_are_looked_for() -> String {
    let (name, _, credentials, config) = from_env();
    let files = [credentials, config]
        .iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" and ");
    format!(
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, the profile {name:?} in {files}, a web \
         identity (AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN), container credentials \
         (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI) and the instance metadata \
         service; a public bucket is read with unsigned requests (the command line's \
         --no-sign-request)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREDENTIALS: &str = "\
# keys
[default]
aws_access_key_id = AKIADEFAULT
aws_secret_access_key = secret-default

[work]
aws_access_key_id=AKIAWORK
aws_secret_access_key = secret/work=
aws_session_token = token
";

    const CONFIG: &str = "\
[default]
region = us-west-2

[profile work]
region = eu-central-1
endpoint_url = http://127.0.0.1:9000
s3 =
  max_concurrent_requests = 20
; a comment
[profile local]
aws_access_key_id = AKIALOCAL
aws_secret_access_key = secret-local
region = auto
[profile workshop]
region = ap-south-1
";

    #[test]
    fn a_profile_is_read_from_both_files() {
        let work = parse("work", Some(CREDENTIALS), Some(CONFIG)).unwrap();
        assert_eq!(work.access_key_id.as_deref(), Some("AKIAWORK"));
        // A value may hold `=`; only the first one splits.
        assert_eq!(work.secret_access_key.as_deref(), Some("secret/work="));
        assert_eq!(work.session_token.as_deref(), Some("token"));
        assert_eq!(work.region.as_deref(), Some("eu-central-1"));
        assert_eq!(work.endpoint_url.as_deref(), Some("http://127.0.0.1:9000"));
        let default = parse("default", Some(CREDENTIALS), Some(CONFIG)).unwrap();
        assert_eq!(default.access_key_id.as_deref(), Some("AKIADEFAULT"));
        assert_eq!(default.region.as_deref(), Some("us-west-2"));
        assert_eq!(default.session_token, None);
    }

    #[test]
    fn keys_may_live_in_the_config_file_alone() {
        let local = parse("local", Some(CREDENTIALS), Some(CONFIG)).unwrap();
        assert_eq!(local.access_key_id.as_deref(), Some("AKIALOCAL"));
        assert_eq!(local.region.as_deref(), Some("auto"));
        let local = parse("local", None, Some(CONFIG)).unwrap();
        assert_eq!(local.secret_access_key.as_deref(), Some("secret-local"));
    }

    #[test]
    fn sections_are_matched_by_whole_name() {
        // `[profile workshop]` is not `work`'s, nor is a credentials section `profile work`.
        let shop = parse("workshop", Some(CREDENTIALS), Some(CONFIG)).unwrap();
        assert_eq!((shop.access_key_id, shop.region.as_deref()), (None, Some("ap-south-1")));
        assert_eq!(parse("missing", Some(CREDENTIALS), Some(CONFIG)), None);
        assert_eq!(parse("work", None, None), None);
        // The config file names the default profile `[default]`, never `[profile]` alone.
        assert_eq!(parse("default", None, Some("[profile]\nregion = x\n")), None);
    }
}
