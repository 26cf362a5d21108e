#include "plugin/ep_library.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace epctx {

namespace {
constexpr size_t kMaxFactories = 4;  // as ONNX Runtime
constexpr size_t kMaxEpDevices = 8;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The canonical path of an existing file, or empty.
std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}
}  // namespace

std::string InstalledPluginFolder() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&InstalledPluginFolder), &info) || !info.dli_fname) return {};
  std::string lib = RealPath(info.dli_fname);
  size_t slash = lib.find_last_of('/');
  if (lib.empty() || slash == std::string::npos) return {};
  return lib.substr(0, slash) + "/epctx";
}

std::unique_ptr<EpctxHardwareDevice> DiscoverCpu() {
  auto d = std::make_unique<EpctxHardwareDevice>();
  d->type = EPCTX_DEVICE_CPU;
  std::ifstream f("/proc/cpuinfo");
  std::string line, vendor, model, flags;
  while (std::getline(f, line)) {
    auto value = [&]() {  // the text after "key\t: "
      size_t c = line.find(':');
      if (c == std::string::npos) return std::string();
      size_t b = line.find_first_not_of(" \t", c + 1);
      return b == std::string::npos ? std::string() : line.substr(b);
    };
    if (vendor.empty() && line.rfind("vendor_id", 0) == 0) vendor = value();
    else if (model.empty() && line.rfind("model name", 0) == 0) model = value();
    else if (flags.empty() && line.rfind("flags", 0) == 0) flags = value();
  }
  static const std::set<std::string> kIsa = {"sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f",
                                             "avx512bw", "avx512dq", "avx512vl", "avx512cd", "avx512_vnni",
                                             "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8",
                                             "amx_bf16"};
  std::istringstream is(flags);
  std::string flag, isa;
  while (is >> flag)
    if (kIsa.count(flag)) isa += (isa.empty() ? "" : " ") + flag;
  d->vendor = vendor == "GenuineIntel" ? "Intel" : vendor == "AuthenticAMD" ? "AMD" : vendor;
  d->vendor_id = vendor == "GenuineIntel" ? 0x8086 : vendor == "AuthenticAMD" ? 0x1022 : 0;
  d->metadata.Set("vendor", d->vendor);
  d->metadata.Set("model", model);
  d->metadata.Set("isa", isa);
  d->metadata.Set("cores", std::to_string(std::max(1u, std::thread::hardware_concurrency())));
  return d;
}

EpLibrary::~EpLibrary() {
  devices_.clear();
  for (EpctxEpFactory* f : factories_)
    if (release_) {
      EpctxStatus* st = release_(f);
      if (st) GetEpctxApi()->ReleaseStatus(st);
    }
  if (handle_) dlclose(handle_);
}

EpRegistry::EpRegistry(std::map<std::string, std::string> env_config, int log_level) : log_level_(log_level) {
  for (const auto& [k, v] : env_config) env_config_.Set(k, v);
  if (const std::string* v = env_config_.Find("allow_virtual_devices"); v && *v == "1") virtual_count_ = 1 << 20;
  hardware_.push_back(DiscoverCpu());
  cpu_ep_device_ = std::make_unique<EpctxEpDevice>();
  cpu_ep_device_->device = hardware_[0].get();
  cpu_ep_device_->ep_name = "CPUExecutionProvider";
  cpu_ep_device_->ep_vendor = "epctx";
}

bool EpRegistry::VirtualDevicesAllowed() const { return virtual_count_ > 0; }

Status EpRegistry::Register(const std::string& name, const std::string& path) {
  return RegisterLibrary(name, path, /*discovered=*/false);
}

Status EpRegistry::RegisterLibrary(const std::string& name, const std::string& path, bool discovered) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_ERROR_IF(name.empty(), INVALID_ARGUMENT, "execution provider library registration name must not be empty");
  for (const auto& l : libraries_) {
    if (l->name_ != name) continue;
    if (l->discovered_) {
      std::string mine = RealPath(l->path_);
      if (!mine.empty() && mine == RealPath(path)) return Status::OK();
    }
    return MakeStatus(ErrorCode::FAIL, "library is already registered under ", name);
  }
  auto lib = std::shared_ptr<EpLibrary>(new EpLibrary());
  lib->name_ = name;
  lib->path_ = path;
  lib->discovered_ = discovered;
  const std::string prefix = "Failed to load execution provider library: " + path + " with error: ";
  int flags = RTLD_NOW | RTLD_LOCAL;
#if defined(__SANITIZE_ADDRESS__)
  // Sanitizer builds keep unloaded libraries mapped: LeakSanitizer runs at exit, after dlclose, and would report a
  // plugin's deliberately immortal statics as leaks and print its frames as "<unknown module>".
  flags |= RTLD_NODELETE;
#endif
  lib->handle_ = dlopen(path.c_str(), flags);
  if (!lib->handle_) {
    const char* e = dlerror();
    return MakeStatus(ErrorCode::FAIL, prefix, e ? e : "unknown dlopen error");
  }
  auto create = reinterpret_cast<EpctxCreateEpFactoriesFn>(dlsym(lib->handle_, "CreateEpFactories"));
  lib->release_ = reinterpret_cast<EpctxReleaseEpFactoryFn>(dlsym(lib->handle_, "ReleaseEpFactory"));
  if (!create || !lib->release_)
    return MakeStatus(ErrorCode::FAIL, prefix, "missing exported symbol ", !create ? "CreateEpFactories" : "ReleaseEpFactory");

  // A ".virtual" registration name allows virtual devices while this library is registered.
  const bool virtual_name = EndsWith(name, ".virtual");
  EpctxKeyValuePairs env = env_config_;
  if (virtual_name || virtual_count_ > 0) env.Set("allow_virtual_devices", "1");
  SetEnvConfigForPlugins(&env);
  EpctxEpFactory* factories[kMaxFactories] = {};
  size_t n = 0;
  EpctxLogger logger{name, log_level_};
  Status st = FromEpctxStatus(create(name.c_str(), GetEpctxApiBase(), &logger, factories, kMaxFactories, &n),
                              "CreateEpFactories of execution provider library '" + path + "' failed");
  if (!st.ok()) {
    SetEnvConfigForPlugins(nullptr);
    return st;
  }
  if (n > kMaxFactories) {
    SetEnvConfigForPlugins(nullptr);
    return MakeStatus(ErrorCode::FAIL, prefix, "CreateEpFactories reported ", n, " factories, more than the ",
                      kMaxFactories, " allowed");
  }
  lib->factories_.assign(factories, factories + n);  // from here ~EpLibrary releases them on failure
  if (n == 0) {
    SetEnvConfigForPlugins(nullptr);
    return MakeStatus(ErrorCode::FAIL, prefix, "CreateEpFactories offered no factory (a plugin built for a newer EP "
                                               "API than this runtime's version ", EPCTX_EP_API_VERSION,
                                               " gets no API table and can offer none)");
  }
  for (EpctxEpFactory* f : lib->factories_) {
    if (!f) {
      SetEnvConfigForPlugins(nullptr);
      return MakeStatus(ErrorCode::FAIL, prefix, "CreateEpFactories returned a NULL factory");
    }
    if (f->version == 0 || f->version > EPCTX_EP_API_VERSION) {
      SetEnvConfigForPlugins(nullptr);
      return MakeStatus(ErrorCode::FAIL, prefix, "a factory was built for EP API version ", f->version,
                        " but this runtime supports versions 1 to ", EPCTX_EP_API_VERSION,
                        "; rebuild the plugin against this epctx");
    }
    if (!f->GetName || !f->GetVendor || !f->GetSupportedDevices || !f->CreateEp || !f->ReleaseEp) {
      SetEnvConfigForPlugins(nullptr);
      return MakeStatus(ErrorCode::FAIL, prefix, "a factory leaves a required function (GetName, GetVendor, "
                                                 "GetSupportedDevices, CreateEp or ReleaseEp) NULL");
    }
    std::vector<const EpctxHardwareDevice*> hw;
    for (const auto& h : hardware_) hw.push_back(h.get());
    EpctxEpDevice* eps[kMaxEpDevices] = {};
    size_t count = 0;
    st = FromEpctxStatus(f->GetSupportedDevices(f, hw.data(), hw.size(), eps, kMaxEpDevices, &count),
                         std::string("GetSupportedDevices of '") + f->GetName(f) + "' failed");
    if (!st.ok()) {
      SetEnvConfigForPlugins(nullptr);
      return st;
    }
    count = std::min(count, kMaxEpDevices);
    for (size_t i = 0; i < count; ++i) {
      std::unique_ptr<EpctxEpDevice> d(eps[i]);
      if (!d) continue;
      bool ours = false;
      for (const auto& h : hardware_) ours |= d->device == h.get();
      if (!ours) d->owned_device.reset(const_cast<EpctxHardwareDevice*>(d->device));
      if (d->device->IsVirtual() && !(virtual_name || virtual_count_ > 0)) continue;  // not allowed: dropped
      d->ep_name = f->GetName(f);
      d->ep_vendor = f->GetVendor(f);
      d->library_name = name;
      lib->devices_.push_back(std::move(d));
    }
  }
  SetEnvConfigForPlugins(nullptr);
  if (virtual_name) ++virtual_count_;
  libraries_.push_back(std::move(lib));
  return Status::OK();
}

size_t EpRegistry::RegisterFolder(const std::string& folder) {
  if (folder.empty()) return 0;
  DIR* d = opendir(folder.c_str());
  if (!d) return 0;
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    std::string f = e->d_name;
    if (f.rfind("libepctx_", 0) == 0 && f.size() > 12 && EndsWith(f, ".so")) files.push_back(f);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  size_t registered = 0;
  for (const std::string& f : files) {
    std::string name = f.substr(9, f.size() - 12), path = folder + "/" + f;
    if (Find(name)) continue;  // an earlier registration keeps its name
    Status st = RegisterLibrary(name, path, /*discovered=*/true);
    if (!st.ok()) {
      EpctxLogger logger{"epctx", log_level_};
      std::string msg = "installed plugin EP library '" + path + "' not registered as '" + name + "': " + st.message();
      GetEpctxApi()->Log(&logger, EPCTX_LOG_WARNING, __FILE__, __LINE__, msg.c_str());
      continue;
    }
    ++registered;
  }
  return registered;
}

Status EpRegistry::Unregister(const std::string& name) {
  std::shared_ptr<EpLibrary> lib;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = libraries_.begin(); it != libraries_.end(); ++it) {
      if ((*it)->name_ != name) continue;
      long users = it->use_count() - 1;
      RETURN_ERROR_IF(users > 0, FAIL, "cannot unregister execution provider library '", name, "': ", users,
                      " session(s) or compiler(s) still use it; release them first");
      lib = *it;
      libraries_.erase(it);
      if (EndsWith(name, ".virtual")) --virtual_count_;
      break;
    }
  }
  RETURN_ERROR_IF(!lib, FAIL, "Execution provider library: ", name, " was not registered.");
  lib.reset();  // ReleaseEpFactory + dlclose
  return Status::OK();
}

std::vector<const EpctxEpDevice*> EpRegistry::Devices() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const EpctxEpDevice*> out{cpu_ep_device_.get()};
  for (const auto& l : libraries_)
    for (const auto& d : l->devices_) out.push_back(d.get());
  return out;
}

std::shared_ptr<EpLibrary> EpRegistry::LibraryOf(const EpctxEpDevice* device) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& l : libraries_)
    for (const auto& d : l->devices_)
      if (d.get() == device) return l;
  return nullptr;
}

std::shared_ptr<EpLibrary> EpRegistry::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& l : libraries_)
    if (l->name_ == name) return l;
  return nullptr;
}

}  // namespace epctx
