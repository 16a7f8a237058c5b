#include <cstdio>

int main() {
  std::printf("lockstep " LOCKSTEP_VERSION "\n");
  return 0;
}
