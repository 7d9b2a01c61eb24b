// cli/toy_main.cpp — the `toy` program: the command line of toy/cli.h with toy's own architectures.
#include "toy/cli.h"

int main(int argc, char** argv) { return toy::cli::main(argc, argv); }
