//! A sharded output in object storage: objects under a prefix (`s3://bucket/dir/`), each shard
//! an upload published whole when it is written ([`Prefix`], the bucket's [`Destination`]).
//! Every front end (the command-line tool, Python, a scheduler's unit) writes to a bucket
//! through this one type.

use ztensor_remote::{Expected, Location, RemoteObject, RemoteOptions, RemoteUpload};

use crate::dest::{Destination, Seen};

/// Objects under a prefix (`s3://bucket/dir/`), where a sharded output goes: each shard an
/// upload published whole when it is written, removed again if the checkpoint fails.
#[derive(Debug)]
pub struct Prefix {
    /// The prefix, without its trailing `/`.
    base: String,
    options: RemoteOptions,
    /// For a write whose objects stand only together (a checkpoint's shards and index in one
    /// conversion): what it published, deleted if a signal stops the process first.
    provisional: Option<ztensor_remote::Provisional>,
}

/// Why a prefix cannot take a checkpoint ([`Prefix::check_free`]).
#[derive(Debug)]
pub enum Occupant {
    /// An index is there already, at this URL.
    Index(String),
    /// A request failed.
    Failed(ztensor_remote::Error),
}

impl std::fmt::Display for Occupant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Occupant::Index(url) => {
                let base = url.rsplit_once('/').map_or(url.as_str(), |(base, _)| base);
                write!(f, "{base}/ holds a sharded checkpoint already ({url})")
            }
            Occupant::Failed(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Occupant {}

impl Prefix {
    /// The prefix `url` (`s3://bucket/dir/`), reached with `options` (its uploads keep at
    /// most [`RemoteOptions::upload_parts`] parts in flight).
    pub fn new(url: &str, options: RemoteOptions) -> Prefix {
        Prefix { base: url.trim_end_matches('/').to_owned(), options, provisional: None }
    }

    /// Every object published through this prefix (each shard, then the index) stands only
    /// once the write is done: a signal before deletes them all (see
    /// [`ztensor_remote::Provisional`]).
    pub fn all_or_nothing(mut self) -> Prefix {
        self.provisional = Some(ztensor_remote::Provisional::new());
        self
    }

    /// Refuses a prefix that holds a checkpoint's index at `index` already, unless `force`,
    /// which removes that index first (so that what is left while the new shards are
    /// published, or after a failure, is never an index naming shards that changed or went),
    /// and returns a note saying so.
    ///
    /// # Errors
    /// [`Occupant::Index`] without `force`; a failed request other than "no such object".
    pub fn check_free(&self, index: &str, force: bool) -> Result<Option<String>, Occupant> {
        let url = self.locate(index);
        let location = Location::parse(&url).map_err(Occupant::Failed)?;
        match RemoteObject::open(&location, &self.options) {
            Err(e) if *e.kind() == ztensor_remote::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Occupant::Failed(e)),
            Ok(_) if force => {
                ztensor_remote::delete(&location, &self.options).map_err(Occupant::Failed)?;
                Ok(Some(format!(
                    "--force: removed {url} first; shards of the checkpoint there before under \
                     other names than this one's are left as they were"
                )))
            }
            Ok(_) => Err(Occupant::Index(url)),
        }
    }

    fn location(&self, name: &str) -> std::io::Result<Location> {
        Location::parse(&self.locate(name)).map_err(std::io::Error::from)
    }
}

impl Destination for Prefix {
    type Object = RemoteUpload;

    fn locate(&self, name: &str) -> String {
        format!("{}/{name}", self.base)
    }

    fn create(&self, name: &str) -> std::io::Result<RemoteUpload> {
        RemoteUpload::create(&self.location(name)?, &self.options).map_err(std::io::Error::from)
    }

    fn publish(&self, name: &str, object: RemoteUpload) -> std::io::Result<()> {
        let location = self.location(name)?;
        if let Some(set) = &self.provisional {
            set.hold(&location, &self.options);
        }
        let published = object.finish();
        if published.is_err()
            && let Some(set) = &self.provisional
        {
            // Nothing of this write's is there: what is (a user's own object at the name) is
            // not deleted by a signal that comes later.
            set.release(&location);
        }
        published.map(drop).map_err(std::io::Error::from)
    }

    fn remove(&self, name: &str) -> std::io::Result<()> {
        ztensor_remote::delete(&self.location(name)?, &self.options).map_err(std::io::Error::from)
    }

    fn open(&self, name: &str) -> std::io::Result<Option<Box<dyn ztensor_io::ReadAt>>> {
        match RemoteObject::open(&self.location(name)?, &self.options) {
            Ok(object) => Ok(Some(Box::new(object))),
            Err(e) if *e.kind() == ztensor_remote::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(std::io::Error::from(e)),
        }
    }

    fn seen(&self, name: &str) -> std::io::Result<Seen> {
        let seen = ztensor_remote::seen(&self.location(name)?, &self.options);
        Ok(match seen.map_err(std::io::Error::from)? {
            Expected::Object(tag) => Seen::Object(tag),
            _ => Seen::Nothing,
        })
    }

    fn publish_if(&self, name: &str, object: RemoteUpload, seen: &Seen) -> std::io::Result<bool> {
        let expected = match seen {
            Seen::Nothing => Expected::Nothing,
            Seen::Object(tag) => Expected::Object(tag.clone()),
            _ => return self.publish(name, object).map(|()| true),
        };
        match object.finish_if(expected) {
            Ok(_) => Ok(true),
            Err(e) if *e.kind() == ztensor_remote::ErrorKind::Changed => Ok(false),
            Err(e) => Err(std::io::Error::from(e)),
        }
    }
}
