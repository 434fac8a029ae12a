// Devices behind one interface, and the registry that finds a device's backend.
//
// Each DeviceType registers a BackendFactory: how many devices of that type are usable here
// (or why none is), how to make the Backend that runs plans on one of them, and optionally a
// SourceRenderer, which renders kernels in the device's language and checks user source
// without needing a usable device (so KILN_DUMP=kernels and explain_plan show CUDA C++ on a
// machine without a GPU). jit/ and ops/ reach devices only through this header:
//
//   jit::backend_for(device).run(plan, args);         // one Backend per device, cached
//   jit::dump_source_renderer()->render(program);     // the source dumps show
//   jit::source_renderer(DeviceType::CUDA)->check(source, name);
//
// The built-in devices (CPU, and CUDA, which is always built and finds its driver at run
// time) are registered explicitly by register_builtin_backends() (runtime/device.cc) on the
// registry's first use, not by static initializers, which a static library may drop.
#ifndef KILN_JIT_BACKEND_BACKEND_H_
#define KILN_JIT_BACKEND_BACKEND_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "jit/fusion/kernel_ir.h"
#include "jit/fusion/launch_plan.h"
#include "kiln/dtype.h"
#include "kiln/tensor.h"
#include "ops/value_type.h"

namespace kiln::jit {

class Backend {
 public:
  virtual ~Backend() = default;
  // Runs `plan` over `args`; returns a fresh buffer for each of plan.outputs, in order.
  // Must not modify any node: the caller realizes the outputs once everything succeeded.
  virtual std::vector<std::shared_ptr<base::Buffer>> run(const LaunchPlan& plan,
                                                         const PlanArguments& args) = 0;

  // Runs `plan` for a compiled function, which replays the same plan with new arguments many
  // times: a backend may keep state per plan (the CUDA backend replays a captured graph).
  // Same contract as run().
  virtual std::vector<std::shared_ptr<base::Buffer>> replay(
      const std::shared_ptr<const LaunchPlan>& plan, const PlanArguments& args) {
    return run(*plan, args);
  }

  // Prepares what `plan`'s kernels derive from the inputs that `constants` binds (the rest
  // null) before its first run: a loaded bundle's captured weights, which the CPU packs for
  // its GEMM once here rather than in the first call. Optional; runs nothing.
  virtual void prepare(const LaunchPlan& /*plan*/, const PlanArguments& /*constants*/) {}

  // Waits until all work queued on the device has finished (a no-op where run() is
  // synchronous, as on the CPU).
  virtual void synchronize() {}

  // Lines the plan dump adds on how this device runs `plan` where it chooses between ways
  // (the CUDA backend: cuBLASLt or the generated kernel for each matmul, and why); empty
  // when it has no choice to report.
  virtual std::string describe_plan(const LaunchPlan& /*plan*/) { return {}; }
};

// A device's kernel language, usable without the device (no GPU, driver or compiler needed
// to render; check() skips what it cannot compile here).
class SourceRenderer {
 public:
  virtual ~SourceRenderer() = default;
  // The language's name, as explain_plan's headings show it ("CUDA C++").
  virtual std::string language() const = 0;
  // The extension of a kernel's source file in dumps, with its dot (".cu").
  virtual std::string file_extension() const = 0;
  // The source of `program` in the language.
  virtual std::string render(const KernelProgram& program) const = 0;
  // OK when user `source`, a module named `name`, compiles for the device, or when no
  // compiler for it is available here; otherwise the compiler's message.
  virtual absl::Status check(const std::string& source, const std::string& name) const = 0;
};

// A kernel's compiled machine code as a bundle carries it (docs/bundles.md): the key the
// device's compile cache files it under, and the code.
struct MachineCode {
  std::string key;
  std::string code;
};

// How a device type's compiled kernels travel in bundles.
struct MachineCodeStore {
  // What the code runs on, e.g. the CPU compiler's flags with their instruction set: a
  // bundle's code for another target is never installed.
  std::function<std::string()> target;
  // The compiled code this process holds for `program` (none while it runs uncompiled).
  std::function<std::vector<MachineCode>(const KernelProgram& program)> code_for;
  // Puts `code` into the device's compile cache, where the kernel's launches find it.
  std::function<absl::Status(const MachineCode& code)> install;
  // Waits for compiles under way, so that code_for sees their code (optional).
  std::function<void()> finish_pending;
};

// What a device type provides to the registry.
struct BackendFactory {
  std::string name;  // "CUDA", for messages
  // How many devices of the type can run kernels here, or why none can (no driver, no GPU).
  // Asked once, on first need.
  std::function<absl::StatusOr<int>()> device_count;
  // The backend for device `index`, which is below device_count(); called once per device.
  std::function<std::unique_ptr<Backend>(int index)> make;
  // Optional: the device's kernel language.
  std::shared_ptr<const SourceRenderer> renderer;
  // Optional: how its compiled kernels are saved into bundles and installed from them.
  std::shared_ptr<const MachineCodeStore> machine_code;
  // How KILN_DEVICE names the type ("cuda"; "cuda:N" picks device N), and whether "auto"
  // prefers it to the CPU when its device 0 is usable.
  std::string setting;
  bool preferred_by_auto = false;
  // Copies between host memory and the type's device memory; empty for the CPU, whose
  // buffers are host memory. The copy to the host synchronizes the device first.
  std::function<std::shared_ptr<base::Buffer>(const base::Buffer& device_buffer)> copy_to_host;
  std::function<std::shared_ptr<base::Buffer>(const base::Buffer& host_buffer, Device device)>
      upload;
};

// Registers (or replaces) the factory for `type`. Backends already made for `type` stay.
void register_backend(DeviceType type, BackendFactory factory);

// Registers the built-in devices; the registry calls it once, before its first use.
void register_builtin_backends();

// OK when `d` can run kernels; otherwise why not: kUnimplemented when no backend is
// registered for its type, the type's reason when none of its devices is usable, and
// kOutOfRange (naming the index and how many devices there are) for an index past them.
absl::Status device_usable(Device d);

// The backend that executes on device `d`; throws kiln::Error if it is not usable.
Backend& backend_for(Device d);

// Backend::describe_plan of device `d`'s backend, or nothing when `d` cannot run here. The
// planner appends it to the plan dump of a plan built for `d`.
std::string describe_plan_on(Device d, const LaunchPlan& plan);

// Waits for every device that has a backend (Kiln has used it); a no-op when none has.
void synchronize_all_devices();

// The renderer registered for `type`, or nullptr when it has none.
const SourceRenderer* source_renderer(DeviceType type);

// The machine-code store registered for `type`, or nullptr when it has none.
const MachineCodeStore* machine_code_store(DeviceType type);

// The renderer whose source KILN_DUMP=kernels and explain_plan show: the first DeviceType
// (in enum order) with one, or nullptr when none has. It needs no usable device.
const SourceRenderer* dump_source_renderer();

// The device that `setting` names (KILN_DEVICE's syntax: "cpu", "cuda", "cuda:N" or "auto",
// which picks cuda:0 when CUDA is usable, else the CPU). Throws kiln::Error, naming the
// setting, when it is not of that syntax or names a device that is not usable.
Device device_from_setting(const std::string& setting);

// A computed tensor on `device` holding `data` (make_realized), copied into the device's memory
// first when it is elsewhere: how wrapped, loaded and read-back data becomes a tensor.
Tensor realized_on(const ops::ValueType& type, const std::shared_ptr<base::Buffer>& data,
                   Device device);

// `buffer` readable on the host: itself when it is in host memory, else a copy (reading a
// device tensor's data). Throws kiln::Error when the copy fails.
std::shared_ptr<const base::Buffer> host_view(const std::shared_ptr<const base::Buffer>& buffer);

// `buffer` in the memory of `device`: itself when it is there already, else a copy (through
// the host between two devices).
std::shared_ptr<base::Buffer> place_on(const std::shared_ptr<base::Buffer>& buffer, Device device);

}  // namespace kiln::jit

#endif  // KILN_JIT_BACKEND_BACKEND_H_
