"""The lab federation: real servers on loopback behind relays that emulate WAN links."""
