//! Credentials in object storage, against a real S3 server (moto's): refused ones give the
//! server's code, missing ones are named as missing, profiles configure the client as the AWS
//! tools do, and no output ever holds one.

use std::path::Path;
use std::process::{Command, Output};

use crate::moto;
use crate::remote::{s, stocked, ztensor_at};
use crate::{root, scratch, stderr, stdout};

#[test]
fn wrong_credentials_give_the_servers_code_and_no_secret() {
    // This server checks credentials: it knows no access key, so every signed request fails.
    let Some(moto) = moto::start_with(
        "wrong_credentials_give_the_servers_code_and_no_secret",
        &[("INITIAL_NO_AUTH_ACTION_COUNT", "0")],
    ) else {
        return;
    };
    let out = ztensor_at(&moto, "s3cr3t-wr0ng", &["info", "s3://models/big.zt"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.contains("s3://models/big.zt"), "{text}");
    assert!(
        text.contains("InvalidAccessKeyId") || text.contains("SignatureDoesNotMatch"),
        "{text}"
    );
    assert!(!text.contains("s3cr3t-wr0ng"), "{text}");
}

/// `ztensor args` with no AWS variable but those in `env`: the configuration comes from the
/// `~/.aws` files of `home`.
fn ztensor_profiled(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ztensor"));
    command.args(args).env("HOME", home);
    for var in [
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
    ] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied()).output().expect("the ztensor binary runs")
}

#[test]
fn an_aws_profile_configures_the_client_as_the_aws_tools_do() {
    let Some(moto) = moto::start("an_aws_profile_configures_the_client_as_the_aws_tools_do") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    stocked(&moto, dir.path());
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    // Keys in the credentials file, region and endpoint in the config file, as `aws
    // configure` writes them; the default profile points nowhere.
    std::fs::write(
        home.join(".aws/credentials"),
        "[default]\naws_access_key_id = unused\naws_secret_access_key = unused\n\n\
         [local]\naws_access_key_id = testing\naws_secret_access_key = testing\n",
    )
    .unwrap();
    let config = format!(
        "[default]\nregion = us-east-1\nendpoint_url = http://127.0.0.1:9\n\n\
         [profile local]\nregion = us-east-1\nendpoint_url = {}\ns3 =\n  max_concurrent_requests = 4\n",
        moto.endpoint
    );
    std::fs::write(home.join(".aws/config"), &config).unwrap();
    let url = "s3://models/big.zt";
    let out = ztensor_profiled(&home, &[("AWS_PROFILE", "local")], &["info", url]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("version:    1.2"), "{}", stdout(&out));
    // The files may live elsewhere, as the variables say.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::rename(home.join(".aws"), &elsewhere).unwrap();
    let (credentials, config) = (s(&elsewhere.join("credentials")), s(&elsewhere.join("config")));
    let env = [
        ("AWS_PROFILE", "local"),
        ("AWS_SHARED_CREDENTIALS_FILE", credentials.as_str()),
        ("AWS_CONFIG_FILE", config.as_str()),
    ];
    let out = ztensor_profiled(&home, &env, &["ls", url]);
    assert!(out.status.success() && stdout(&out).contains("small"), "{}", stderr(&out));
    // A profile named and found nowhere: status 2, naming it and the files looked in.
    let env = [("AWS_PROFILE", "nope"), ("AWS_CONFIG_FILE", config.as_str())];
    let out = ztensor_profiled(&home, &env, &["info", url]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.contains("\"nope\"") && text.contains(&config) && text.contains(url), "{text}");
}

/// Every remote failure the command line meets, with credentials in the environment (a
/// session token, a password in the endpoint) and a server that echoes whatever it was sent
/// in its errors, redirects elsewhere, or answers without end: no output line (stdout, stderr,
/// the request statistics) holds a credential, and each command ends with an error.
#[test]
fn no_output_holds_a_credential_whatever_the_server_does() {
    use crate::liar::{self, Answer};
    const SECRET: &str = "envsecret-0123456789abcdef";
    const TOKEN: &str = "envtoken-abcdefghijklmnopqrstuv";
    const PASSWORD: &str = "envpassword-987654321";
    let echo = liar::start(|req| {
        let body = format!(
            "<Error><Code>AccessDenied</Code><Message>{:?} {SECRET} {TOKEN} {PASSWORD}</Message></Error>",
            req.headers
        );
        Answer::Full(403, Vec::new(), body.into_bytes())
    });
    let elsewhere = liar::start(|_| Answer::Full(200, Vec::new(), Vec::new()));
    let to = format!("{}/b/x.zt", elsewhere.endpoint);
    let redirect =
        liar::start(move |_| Answer::Full(307, vec![format!("Location: {to}")], Vec::new()));
    let endless =
        liar::start(|_| Answer::Endless(500, Vec::new(), format!("{TOKEN} ").into_bytes()));
    let dir = scratch("remote-secrets");
    let local = dir.join("m.zt");
    std::fs::copy(root().join("fixtures/examples/tiny-v1.2.zt"), &local).unwrap();
    let local = local.to_str().unwrap().to_owned();
    for server in [&echo, &redirect, &endless] {
        let port = server.endpoint.rsplit(':').next().unwrap();
        let endpoint = format!("http://user:{PASSWORD}@127.0.0.1:{port}");
        for args in [
            vec!["info", "s3://b/x.zt"],
            vec!["verify", "s3://b/x.zt"],
            vec!["convert", &local, "s3://b/y.zt"],
            vec!["info", "--json", "s3://b/x.zt"],
        ] {
            let out = Command::new(env!("CARGO_BIN_EXE_ztensor"))
                .args(&args)
                .env("AWS_ENDPOINT_URL", &endpoint)
                .env("AWS_ACCESS_KEY_ID", "AKIAENVTESTKEY00001")
                .env("AWS_SECRET_ACCESS_KEY", SECRET)
                .env("AWS_SESSION_TOKEN", TOKEN)
                .env("AWS_REGION", "us-east-1")
                .env("ZTENSOR_REMOTE_STATS", "1")
                .env_remove("AWS_PROFILE")
                .output()
                .unwrap();
            let said = format!("{}{}", stdout(&out), stderr(&out));
            assert!(!out.status.success(), "{args:?}: {said}");
            for secret in [SECRET, TOKEN, PASSWORD] {
                assert!(!said.contains(secret), "{args:?} printed {secret}: {said}");
            }
            assert!(said.contains("s3://b/"), "{args:?}: {said}");
        }
    }
    assert!(elsewhere.seen.lock().unwrap().is_empty(), "a redirect was followed off the endpoint");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// No credentials anywhere and the instance metadata service off (`AWS_EC2_METADATA_DISABLED`,
/// as the AWS tools honour it): said so at once, naming where they were looked for and the
/// flag for a public bucket, instead of asking the metadata address anyway.
#[test]
fn missing_credentials_are_named_as_missing() {
    let out = Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(["info", "s3://bucket/x.zt"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("no AWS credentials found"), "{said}");
    assert!(said.contains("AWS_ACCESS_KEY_ID") && said.contains("--no-sign-request"), "{said}");
    assert!(said.contains("/nonexistent-home/.aws/credentials"), "{said}");
    // Unsigned, nothing is looked for: the same command goes on to the (absent) server.
    let out = Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(["info", "s3://bucket/x.zt", "--no-sign-request"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    assert!(!stderr(&out).contains("no AWS credentials found"), "{}", stderr(&out));
}
