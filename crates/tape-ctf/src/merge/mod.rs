//! The merge stage: the events of several streams in time order.

pub(crate) mod tournament;
