//! GraphViz file format parser.

pub mod ast;
pub mod lexer;
pub mod parser;
pub mod printer;

pub use lexer::Lexer;
pub use lexer::Token;
pub use parser::DotParser;
pub use printer::dump_ast;
