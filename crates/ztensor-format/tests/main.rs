//! Integration tests of ztensor-format.
