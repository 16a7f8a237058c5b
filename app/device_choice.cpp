#include "app/device_choice.h"

#include "nn/error.h"

namespace lockstep::app {

DeviceChoice choose_device(const DeviceView& v) {
  DeviceChoice choice;
  if (v.requested == "cpu") return choice;
  const bool gpus_for_all = v.gpus > 0 && v.local_size <= v.gpus;
  if (v.requested == "auto") {
    if (!v.cuda_built || v.gpus == 0) return choice;
    if (!gpus_for_all) {
      choice.note = detail::concat(
          "device = \"auto\": ", v.local_size, " ranks on ", v.host, " but only ", v.gpus,
          " GPU(s) visible there, so its ranks compute on the CPU; start at most one rank per "
          "GPU to use them, or set device = \"cpu\" to silence this note");
      return choice;
    }
    choice.cuda = true;
    choice.device_index = v.local_rank;
    return choice;
  }
  if (!v.cuda_built) {
    choice.error =
        "config key device is \"cuda\" but this lockstep was built without CUDA (see `lockstep "
        "info`); use device = \"cpu\"";
    return choice;
  }
  if (v.local_rank >= v.gpus) {
    choice.error = detail::concat("config key device is \"cuda\": rank ", v.rank, " is local rank ",
                                  v.local_rank, " of ", v.local_size, " on ", v.host, " but only ",
                                  v.gpus, " GPU(s) are visible there; start at most one rank per ",
                                  "GPU, or use device = \"auto\" to fall back to the CPU");
    return choice;
  }
  choice.cuda = true;
  choice.device_index = v.local_rank;
  return choice;
}

}  // namespace lockstep::app
