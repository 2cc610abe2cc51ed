//! Which webstores a node serves, as a pure decision: the `--webstores` a node was started
//! with, and what its store records of webstores it took from another shard or gave away
//! (a move between shards). A webstore given away is never served again, whatever the flag
//! says: ownership is durable, not only a flag.
//!
//! Must not touch: I/O (the store keeps the records; the service asks here).

/// What a node's store records about one webstore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// Taken from another shard: served here, whether or not `--webstores` names it.
    Taken,
    /// Given away to another shard: never served here again.
    Released,
    /// Being moved to another shard: served for reads, its writes refused, until the move
    /// releases it (or is called off). Durable, so that a restart midway does not take
    /// writes the other shard would never see.
    Moving,
    /// Handed over to the other shard, which may have taken it: served for reads, its writes
    /// refused for good (a move can no longer be called off), until the move releases it.
    HandedOver,
}

impl Ownership {
    /// The byte the store keeps.
    pub fn to_byte(self) -> u8 {
        match self {
            Ownership::Taken => 1,
            Ownership::Released => 2,
            Ownership::Moving => 3,
            Ownership::HandedOver => 4,
        }
    }

    /// The ownership a stored byte names.
    pub fn from_byte(byte: u8) -> Option<Ownership> {
        match byte {
            1 => Some(Ownership::Taken),
            2 => Some(Ownership::Released),
            3 => Some(Ownership::Moving),
            4 => Some(Ownership::HandedOver),
            _ => None,
        }
    }
}

/// Whether a node serves webstore `id`: `named` is `--webstores` (`None`: every webstore of
/// the catalogue), `recorded` what the store says of it. A webstore moving away is served
/// (for reads) whatever the flag says: only a webstore served here is ever frozen for a move,
/// one it took from another shard included.
pub fn serves(named: Option<&[String]>, recorded: Option<Ownership>, id: &str) -> bool {
    match recorded {
        Some(Ownership::Released) => false,
        Some(Ownership::Taken | Ownership::Moving | Ownership::HandedOver) => true,
        None => named.is_none_or(|named| named.iter().any(|named| named == id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_released_webstore_is_never_served_and_a_taken_one_always() {
        let named = vec!["a".to_owned()];
        assert!(serves(Some(&named), None, "a"));
        assert!(!serves(Some(&named), None, "b"));
        assert!(
            serves(None, None, "b"),
            "without --webstores, every webstore"
        );
        assert!(!serves(Some(&named), Some(Ownership::Released), "a"));
        assert!(!serves(None, Some(Ownership::Released), "a"));
        assert!(serves(Some(&named), Some(Ownership::Taken), "b"));
        for moving in [Ownership::Moving, Ownership::HandedOver] {
            assert!(
                serves(Some(&named), Some(moving), "b"),
                "a webstore taken earlier and moving away again is still read here"
            );
        }
    }

    proptest! {
        #[test]
        fn ownership_bytes_round_trip(byte in any::<u8>()) {
            if let Some(ownership) = Ownership::from_byte(byte) {
                prop_assert_eq!(ownership.to_byte(), byte);
            }
        }

        #[test]
        fn released_wins_over_any_flag(named in proptest::option::of(proptest::collection::vec("[a-c]", 0..4)), id in "[a-c]") {
            prop_assert!(!serves(named.as_deref(), Some(Ownership::Released), &id));
        }
    }
}
