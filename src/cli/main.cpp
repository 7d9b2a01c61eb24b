// cli/main.cpp — `toy`: dispatch to a command, map failures to documented exit codes.
// toy::cli::main is the library entry point (toy/cli.h); toy_main.cpp is the `toy` program.
#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli/cli.h"
#include "toy/cli.h"
#include "toy/io/gguf.h"
#include "toy/primitives/device.h"

namespace toy::cli {

namespace {
void print_overview() {
  std::cout << "toy " TOY_VERSION
               " — readable machine learning: run, train, evaluate and serve transformer LMs.\n\n"
               "usage: toy COMMAND [args] [options]\n\ncommands:\n";
  for (const Command& c : commands())
    std::cout << "  " << c.name << std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ') << c.summary << "\n";
  std::cout
      << "\n  toy help COMMAND     options of one command (or toy COMMAND --help)\n  toy --version        version\n"
         "  toy --manifest       every command, flag and exit code as JSON\n"
         "  toy --list-devices   the CPU and the Vulkan devices (toy devices)\n"
         "\nexit codes: 0 ok, 1 failure, 2 usage error, 3 invalid input file, 4 network failure, 5 device unavailable, "
         "130 interrupted\n";
}
}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGINT, [](int) { std::_Exit(kInterrupted); });
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || (args[0] == "help" && args.size() == 1)) {
    print_overview();
    return args.empty() ? kUsage : kOk;
  }
  if (args[0] == "--version" || args[0] == "-V") {
    std::cout << "toy " TOY_VERSION "\n";
    return kOk;
  }
  if (args[0] == "--manifest") {
    std::cout << manifest_json() << "\n";
    return kOk;
  }
  if (args[0] == "--list-devices") args[0] = "devices";  // llama.cpp's spelling
  // `toy help CMD …` is `toy CMD … --help`.
  if (args[0] == "help" && args.size() >= 2) {
    args.erase(args.begin());
    args.push_back("--help");
  }
  const Command* cmd = find_command(args[0]);
  // `toy train vit …` is the command train-vit: a recipe with flags of its own (cmd_vit.cpp).
  if (args.size() > 1)
    if (const Command* sub = find_command(args[0] + "-" + args[1])) {
      cmd = sub;
      args.erase(args.begin());
    }
  if (!cmd) {
    std::vector<std::string> names;
    for (const Command& c : commands()) names.push_back(c.name);
    const std::string near = closest(args[0], names);
    std::cerr << "toy: unknown command '" << args[0] << "'" << (near.empty() ? "" : "; did you mean '" + near + "'?")
              << " (see toy --help)\n";
    return kUsage;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const std::string& a : rest) {
    if (a == "--") break;
    if (a == "--help" || a == "-h") {
      std::cout << help_text(*cmd);
      return kOk;
    }
  }
  try {
    check_environment();
    return cmd->run(parse_args(*cmd, rest));
  } catch (const UsageError& e) {
    std::cerr << "toy " << cmd->name << ": " << e.what() << "\n";
    return kUsage;
  } catch (const toy::gguf::GgufError& e) {
    std::cerr << "toy " << cmd->name << ": invalid model file: " << e.what() << "\n";
    return kBadInput;
  } catch (const InputError& e) {
    std::cerr << "toy " << cmd->name << ": " << e.what() << "\n";
    return kBadInput;
  } catch (const NetworkError& e) {
    std::cerr << "toy " << cmd->name << ": network: " << e.what() << "\n";
    return kNetwork;
  } catch (const toy::DeviceError& e) {
    std::cerr << "toy " << cmd->name << ": device: " << e.what() << "\n";
    return kDevice;
  } catch (const std::exception& e) {
    std::cerr << "toy " << cmd->name << ": error: " << e.what() << "\n";
    return kFailure;
  }
}

}  // namespace toy::cli
