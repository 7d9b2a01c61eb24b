// toy/cli.h — the `toy` command line as a library.
//
// A program of your own runs every toy command (describe, infer, eval, train, serve, init --card,
// …) through it, with the architectures it registers itself:
//
//   static toy::Registration reg(toy::architecture<MyArch>());        // my_arch.cpp
//   int main(int argc, char** argv) { return toy::cli::main(argc, argv); }
//
// Link it with the CMake target toy::cli (find_package(toy)).
#pragma once

namespace toy::cli {

// Parses argv as `toy` does, runs the command and returns its documented exit code.
int main(int argc, char** argv);

}  // namespace toy::cli
