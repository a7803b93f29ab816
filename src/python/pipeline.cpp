// kvplan.profile(), search(), tune(): the main job from Python. Options are the CLI's flags,
// parsed by the same CLI11 definitions (cli/profile_flags.h, cli/search_flags.h) into the same
// typed requests, so defaults, validation and error messages are the CLI's; the Python wrapper
// (python/kvplan/__init__.py) turns keyword arguments into those flags. The GIL is released
// while the model runs; progress goes to stderr as the CLI's does.
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/cli_util.h"
#include "cli/profile_flags.h"
#include "cli/search_flags.h"
#include "core/error.h"
#include "pipeline/tune.h"
#include "profile/profile_data.h"
#include "profile/progress.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace kvplan::python {
namespace {

struct Flags {
  cli::ProfileFlags profile;
  cli::SearchFlags search;
};

// Parses `args` (e.g. {"--max-bytes-per-token", "6480"}) with the flags of `kvplan <command>`.
Flags parse_flags(const std::string& command, std::vector<std::string> args, bool profile_flags,
                  bool search_flags) {
  Flags f;
  CLI::App app{"kvplan " + command};
  if (profile_flags) cli::add_profile_flags(&app, f.profile);
  if (search_flags) cli::add_search_flags(&app, f.search);
  std::reverse(args.begin(), args.end());  // CLI11 takes the vector last argument first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    fail(ErrorCode::kInvalidArgument, "kvplan.{}: {}", command, e.what());
  }
  return f;
}

Profile profile(const std::filesystem::path& model, const std::vector<std::string>& args) {
  const Flags f = parse_flags("profile", args, true, false);
  pipeline::ProfileRequest request = cli::profile_request_from_flags(f.profile);
  nb::gil_scoped_release unlocked;
  ProgressPrinter printer(stderr);
  request.options.progress = [&](const ProfileProgress& p) { printer.update(p); };
  Profile result = pipeline::profile_model(model, request);
  printer.finish();
  return result;
}

pipeline::TunedPlan search(Profile profile, const std::filesystem::path& model,
                           const std::vector<std::string>& args,
                           const std::optional<std::filesystem::path>& calibration) {
  const Flags f = parse_flags("search", args, false, true);
  const pipeline::SearchRequest request = cli::search_request_from_flags(f.search);
  nb::gil_scoped_release unlocked;
  return pipeline::search_profile(std::move(profile), model, request, calibration,
                                  cli::config_dir() / "calibration" / "default.jsonl");
}

pipeline::TunedPlan tune(const std::filesystem::path& model, const std::vector<std::string>& args,
                         const std::optional<std::filesystem::path>& profile_out) {
  const Flags f = parse_flags("tune", args, true, true);
  pipeline::TuneRequest request{.model = model,
                                .profile = cli::profile_request_from_flags(f.profile),
                                .search = cli::search_request_from_flags(f.search)};
  nb::gil_scoped_release unlocked;
  ProgressPrinter printer(stderr);
  request.profile.options.progress = [&](const ProfileProgress& p) { printer.update(p); };
  request.profile.on_profile = [&](const Profile& p) {
    printer.finish();
    if (profile_out) write_profile(*profile_out, p);
  };
  return pipeline::tune(request);
}

}  // namespace

void bind_pipeline(nb::module_& m) {
  nb::class_<Profile>(m, "Profile", "A sensitivity profile (profile.json): per layer x candidate.")
      .def_static("load", &read_profile, nb::arg("path"))
      .def(
          "save",
          [](const Profile& p, const std::filesystem::path& path) { write_profile(path, p); },
          nb::arg("path"), "Writes profile.json atomically.")
      .def_prop_ro("model_name", [](const Profile& p) { return p.model.name; })
      .def_prop_ro("n_layers", &Profile::n_layers)
      .def_prop_ro("candidates",
                   [](const Profile& p) {
                     std::vector<std::string> names;
                     for (const KvPair& c : p.candidates) names.push_back(c.name());
                     return names;
                   })
      .def_prop_ro("complete", &Profile::complete);

  nb::class_<pipeline::TunedPlan>(m, "TunedPlan", "What tune() and search() return.")
      .def_ro("plan", &pipeline::TunedPlan::plan)
      .def_ro("profile", &pipeline::TunedPlan::profile)
      .def_prop_ro(
          "budget", [](const pipeline::TunedPlan& t) { return t.budget.description; },
          "The budget as resolved on the model.");

  m.def("_profile", &profile, nb::arg("model"), nb::arg("args"));
  m.def("_search", &search, nb::arg("profile"), nb::arg("model"), nb::arg("args"),
        nb::arg("calibration") = nb::none());
  m.def("_tune", &tune, nb::arg("model"), nb::arg("args"), nb::arg("profile_out") = nb::none());
}

}  // namespace kvplan::python
