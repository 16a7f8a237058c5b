#include "data/catalog.h"

#include "common/error.h"
#include "data/cifar10.h"
#include "data/idx.h"

namespace lockstep::data {

std::vector<std::string> dataset_names() {
  return {"fashion-mnist", "mnist", "cifar10", "folder"};
}

void check_dataset_name(const std::string& name) {
  for (const std::string& known : dataset_names()) {
    if (name == known) return;
  }
  fail_input("unknown dataset '", name, "' (known: fashion-mnist, mnist, cifar10, folder)");
}

std::string default_data_dir(const std::string& name) {
  check_dataset_name(name);
  if (name == "fashion-mnist") return "/usr/share/datasets/fashion-mnist";
  if (name == "folder") {
    fail_input("dataset \"folder\" needs data_dir: the folder with train/<class>/*.png and ",
               "test/<class>/*.png");
  }
  return "data/" + name;
}

std::string data_folder(const std::string& name, const std::string& dir) {
  return dir.empty() ? default_data_dir(name) : dir;
}

Normalization default_normalization(const std::string& name) {
  check_dataset_name(name);
  if (name == "folder") return Normalization{{0.5f}, {0.5f}};
  return name == "cifar10" ? cifar10_normalization() : mnist_normalization();
}

Augmentation default_augmentation(const std::string& name) {
  check_dataset_name(name);
  return name == "cifar10" ? cifar10_augmentation() : Augmentation{};
}

Dataset load_dataset(const std::string& name, const std::string& dir, bool train,
                     const FolderOptions& folder_options, std::vector<std::string>* notes) {
  check_dataset_name(name);
  const std::string folder = data_folder(name, dir);
  if (name == "folder") {
    FolderDataset loaded = load_image_folder(folder, train, folder_options);
    if (notes != nullptr) {
      for (const std::string& note : loaded.stats.notes()) notes->push_back(note);
    }
    return std::move(loaded.dataset);
  }
  if (name == "cifar10") return load_cifar10(folder, train);
  return load_mnist_family(folder, train, name);
}

}  // namespace lockstep::data
