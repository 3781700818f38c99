"""What the device is and what it reads: DeviceInfo and the CPU (device), telemetry sources, NVIDIA and AMD
beside them, and detect (which one is here)."""
