#include "commands.hpp"

int main(int argc, char** argv) { return dpsim::app::run(argc, argv, dpsim::app::register_lean); }
