//! Device identity, telemetry and host facts.
