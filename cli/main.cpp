#include "cli/commands.hpp"

int main(int argc, char** argv) { return aisp::cli::run(argc, argv); }
