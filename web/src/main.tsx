import { render } from 'preact';
import { App } from './app';
import './style.css';
import './panels.css';

render(<App />, document.getElementById('app')!);
