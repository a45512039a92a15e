#if canImport(Glibc)
import Glibc
#endif
// memwarn-v2-scenarios: the cgroup v2 scenarios, run inside a VM by Scripts/v2-vm-test.
// (Skeleton: the scenarios are being written.)
print("memwarn-v2-scenarios: no scenarios yet")
exit(1)
